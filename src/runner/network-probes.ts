/**
 * Round trips to a remote target, measured apart from the cell's requests: TCP handshakes (as
 * AIPerf's `--network-latency-automatic` takes them) and HTTP exchanges of a cheap endpoint on a
 * keep-alive connection of their own (a gateway that terminates TCP hides the rest of the path
 * from a handshake). Before the measured phase `NETWORK_PROBES_BEFORE` of each, back to back;
 * during it one of each every `NETWORK_PROBE_INTERVAL_MS`, from a timer, none on the measured
 * connections; all of it on a thread of its own (`network-probe-worker.ts`).
 */
import { lookup } from 'node:dns/promises'
import { isIP, connect as netConnect } from 'node:net'
import { Worker } from 'node:worker_threads'
import { monoMs } from '../client/clock.ts'
import { StreamConnections } from '../client/connections.ts'
import { ServegateError } from '../errors.ts'
import { trustedCa } from '../http-request.ts'
import { networkAdjusted, rttSeries } from '../metrics/network.ts'
import type { NetworkProbes, RunRecord } from '../schema/run.ts'
import type { FromProbeWorker, ProbeWorkerSetup } from './network-probe-worker.ts'

/** Probes of each kind before the measured phase. */
export const NETWORK_PROBES_BEFORE = 10
/**
 * ms between two probes of a kind during the measured phase: AIPerf probes once a second; twice
 * a second gives a short cell its samples, at two small exchanges a second off the measured path.
 */
const NETWORK_PROBE_INTERVAL_MS = 500
/** Rounds of both probes run and dropped before the counted ones. */
const WARM_ROUNDS = 3
/** A probe that takes longer fails (counted, in no figure). */
const PROBE_TIMEOUT_MS = 2000
/** The cheap endpoints tried, in order: the first that answers 2xx before the cell is the one probed. */
const HTTP_ENDPOINTS = ['/health', '/v1/models'] as const
type HttpEndpoint = (typeof HTTP_ENDPOINTS)[number]

/** Round trips of one probe kind over one phase, ms, and the probes that failed. */
class Tally {
  readonly rttMs: number[] = []
  failed = 0
  series(): NetworkProbes['handshake']['before'] {
    return rttSeries(this.rttMs, this.failed)
  }
}

/**
 * One TCP handshake: `connect()` on a fresh socket to its connect event, ms; the socket is closed
 * at once. Plain TCP even for https (AIPerf's method), to an address resolved beforehand, so
 * neither TLS nor DNS is in it.
 */
function handshakeRtt(address: string, port: number, timeoutMs = PROBE_TIMEOUT_MS): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = monoMs()
    const socket = netConnect({ host: address, port })
    const timer = setTimeout(
      () => socket.destroy(new ServegateError('CONNECT_FAILED', `no TCP handshake with ${address}:${port} within ${timeoutMs} ms`)),
      timeoutMs,
    )
    socket.once('connect', () => {
      const rtt = monoMs() - start
      clearTimeout(timer)
      socket.destroy()
      resolve(rtt)
    })
    socket.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
  })
}

/** One `GET path` on the probe's connection: its status and the time from the request written to its response head read, ms. */
function httpExchange(
  connections: StreamConnections,
  path: string,
  headers: Record<string, string>,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<{ status: number; rttMs: number }> {
  return new Promise((resolve, reject) => {
    let sentAt = 0
    let headAt = 0
    let status = 0
    const timer = setTimeout(
      () => exchange.abort(new ServegateError('REQUEST_DEADLINE', `no reply to GET ${path} within ${timeoutMs} ms`)),
      timeoutMs,
    )
    const exchange = connections.send(
      { method: 'GET', path, headers, body: null },
      {
        onSent: (_body, at) => (sentAt = at),
        onHead: (code, _headers, at) => {
          status = code
          headAt = at
        },
        onBody: () => {},
        onEnd: () => {
          clearTimeout(timer)
          resolve({ status, rttMs: headAt - sentAt })
        },
        onError: (err) => {
          clearTimeout(timer)
          reject(err)
        },
      },
    )
  })
}

const ok = (status: number): boolean => status >= 200 && status < 300

/** Where the probes go: the origin's host and port, its address resolved once. */
interface ProbeTarget {
  origin: string
  /** `host:port` as the manifest's `target.host` records it. */
  host: string
  address: string
  port: number
}

async function probeTarget(origin: string): Promise<ProbeTarget> {
  const url = new URL(origin)
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1')
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port)
  // Resolved once, so a probe times the handshake and not a DNS lookup (AIPerf resolves once too);
  // where the lookup fails, each probe resolves the name itself rather than the cell failing.
  const address =
    isIP(hostname) === 0
      ? await lookup(hostname).then(
          (r) => r.address,
          () => hostname,
        )
      : hostname
  return { origin, host: url.host, address, port }
}

/**
 * The probes of one cell on a remote target. `start` runs the probes before the measured phase,
 * `during` starts the timer at the measured phase's start, `stop` ends it and returns what the
 * record keeps (but `adjusted`, which needs the cell's latencies).
 * @example
 * const probes = await NetworkProbeSession.start('https://10.0.0.2:8443', {}, signal)
 * probes.during()
 * const network = await probes.stop()
 */
export class NetworkProbeSession {
  readonly #target: ProbeTarget
  readonly #headers: Record<string, string>
  readonly #connections: StreamConnections
  #endpoint: HttpEndpoint | null = null
  #reason: string | null = null
  readonly #handshake = { before: new Tally(), during: new Tally() }
  readonly #http = { before: new Tally(), during: new Tally() }
  #timer: NodeJS.Timeout | null = null
  #inFlight: Promise<void> | null = null

  private constructor(target: ProbeTarget, headers: Record<string, string>) {
    this.#target = target
    this.#headers = headers
    // One connection, kept alive: the TLS handshake (https) happens once, before the first timed probe.
    this.#connections = new StreamConnections(target.origin, 1)
  }

  /**
   * Picks the HTTP endpoint (the first of `/health`, `/v1/models` that answers 2xx; that exchange
   * also opens the probe's connection) and probes `before` times each way.
   * @param headers sent with each HTTP probe (the API key's `authorization`: never recorded)
   */
  static async start(
    origin: string,
    headers: Record<string, string>,
    signal?: AbortSignal,
    before = NETWORK_PROBES_BEFORE,
  ): Promise<NetworkProbeSession> {
    const session = new NetworkProbeSession(await probeTarget(origin), headers)
    await session.#pickEndpoint()
    // Uncounted: the probes' code runs cold at first (a fresh thread), its first rounds slower than the path.
    for (let i = 0; i < WARM_ROUNDS && signal?.aborted !== true; i++) await session.#round(new Tally(), new Tally())
    for (let i = 0; i < before && signal?.aborted !== true; i++) await session.probeOnce('before')
    return session
  }

  /** Starts probing once per `NETWORK_PROBE_INTERVAL_MS`, each round skipped while the last is still out. */
  during(): void {
    if (this.#timer !== null) return
    this.#timer = setInterval(() => {
      this.#inFlight ??= this.probeOnce('during').finally(() => (this.#inFlight = null))
    }, NETWORK_PROBE_INTERVAL_MS)
    this.#timer.unref()
  }

  /** Stops probing, closes the probe's connection, and returns the round trips. */
  async stop(): Promise<Omit<NetworkProbes, 'adjusted'>> {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    await this.#inFlight
    await this.#connections.destroy()
    return {
      host: this.#target.host,
      intervalMs: NETWORK_PROBE_INTERVAL_MS,
      handshake: { before: this.#handshake.before.series(), during: this.#handshake.during.series() },
      http: {
        endpoint: this.#endpoint,
        reason: this.#reason,
        before: this.#http.before.series(),
        during: this.#http.during.series(),
      },
    }
  }

  async #pickEndpoint(): Promise<void> {
    const answers: string[] = []
    for (const path of HTTP_ENDPOINTS) {
      try {
        const { status } = await httpExchange(this.#connections, path, this.#headers)
        if (ok(status)) {
          this.#endpoint = path
          return
        }
        answers.push(`${path} ${status}`)
      } catch (err) {
        answers.push(`${path} ${(err as { code?: string }).code ?? (err as Error).message}`)
      }
    }
    this.#reason = `neither endpoint answered 2xx (${answers.join(', ')}); only TCP handshakes were probed`
  }

  /** One probe of each kind now, counted in `phase` (the timer's step, and each probe before the cell); a failure is counted. */
  probeOnce(phase: 'before' | 'during'): Promise<void> {
    return this.#round(this.#handshake[phase], this.#http[phase])
  }

  async #round(handshake: Tally, http: Tally): Promise<void> {
    try {
      handshake.rttMs.push(await handshakeRtt(this.#target.address, this.#target.port))
    } catch {
      handshake.failed++
    }
    if (this.#endpoint === null) return
    try {
      // The server closed the idle connection: reopening it (and TLS) is not the round trip, so that exchange is not timed.
      if (this.#connections.opened === 0) await httpExchange(this.#connections, this.#endpoint, this.#headers)
      const { status, rttMs } = await httpExchange(this.#connections, this.#endpoint, this.#headers)
      if (ok(status)) http.rttMs.push(rttMs)
      else http.failed++
    } catch {
      http.failed++
    }
  }
}

/** The probe thread's module: the TypeScript source inside this repository, the compiled file in the package. */
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './network-probe-worker.ts' : './network-probe-worker.js', import.meta.url)

/** The probe thread's next message of `kind`; a thread that fails or exits first rejects, INTERNAL. */
function nextMessage<K extends FromProbeWorker['kind']>(worker: Worker, kind: K): Promise<Extract<FromProbeWorker, { kind: K }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: FromProbeWorker): void => {
      if (m.kind === 'failed') fail(new ServegateError('INTERNAL', `network probes failed: ${m.message}`))
      else if (m.kind === kind) done(() => resolve(m as Extract<FromProbeWorker, { kind: K }>))
    }
    const fail = (error: Error): void => done(() => reject(error))
    const onExit = (code: number): void =>
      fail(new ServegateError('INTERNAL', `the network probe thread exited (${code}) before it answered`))
    const done = (then: () => void): void => {
      worker.off('message', onMessage)
      worker.off('error', fail)
      worker.off('exit', onExit)
      then()
    }
    worker.on('message', onMessage)
    worker.once('error', fail)
    worker.once('exit', onExit)
  })
}

/**
 * A cell on a remote target, its round trips measured around it on a thread of their own
 * (`network-probe-worker.ts`): the probes before the cell's load, the timer from its measured
 * phase's start (after `onMeasureStart`) to its end, and the record's `network`, with TTFT and e2e
 * adjusted by the estimate (`networkAdjusted`).
 * @param apiKey sent as the HTTP probes' `authorization` (a gateway may guard `/v1/models`); never recorded
 */
export async function withNetworkProbes(
  origin: string,
  apiKey: string | undefined,
  hooks: { signal?: AbortSignal; onMeasureStart?: () => void | Promise<void> },
  measure: (onMeasureStart: () => Promise<void>) => Promise<RunRecord>,
): Promise<RunRecord> {
  const workerData: ProbeWorkerSetup = {
    origin,
    headers: apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` },
    ca: trustedCa(origin) ?? null,
  }
  const worker = new Worker(WORKER_URL, { workerData, stdout: false, stderr: false })
  const onAbort = (): void => worker.postMessage('abort')
  hooks.signal?.addEventListener('abort', onAbort, { once: true })
  try {
    await nextMessage(worker, 'ready')
    const record = await measure(async () => {
      await hooks.onMeasureStart?.()
      worker.postMessage('during')
    })
    const probes = nextMessage(worker, 'probes')
    worker.postMessage('stop')
    const { probes: network } = await probes
    return { ...record, network: { ...network, adjusted: networkAdjusted(network, record.metrics.distributions) } }
  } finally {
    hooks.signal?.removeEventListener('abort', onAbort)
    // However the cell ends, no probe thread, timer or socket outlives it.
    await worker.terminate()
  }
}
