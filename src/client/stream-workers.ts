import { Worker } from 'node:worker_threads'
import { sanitizeMessage } from '../errors.ts'
import { trustedCa } from '../http-request.ts'
import { monoMs } from './clock.ts'
import { emptyObservation, type StreamObservation, type TextCapture } from './observation.ts'
import type { FromWorker, ToWorker, WorkerMeasure, WorkerSetup } from './worker-protocol.ts'

/** The worker's module: the TypeScript source inside this repository, the compiled file in the package. */
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './stream-worker.ts' : './stream-worker.js', import.meta.url)

interface Pending {
  resolve: (obs: StreamObservation) => void
  signal: AbortSignal
  onAbort: () => void
  dispatchedAt: number
}

/** One worker thread and what waits on it. */
interface Lane {
  index: number
  worker: Worker
  ready: Promise<void>
  pending: Map<number, Pending>
  /** Why it can take no more requests (it crashed or exited); null while it is alive. */
  dead: string | null
  waiting: Array<(message: FromWorker) => boolean>
}

/** What every worker shares: where it sends and how. */
export type StreamWorkersSetup = Omit<WorkerSetup, 'worker' | 'connections' | 'ca'> & {
  /** Connections over all workers (each opens its share); null for as many as they need. */
  connections: number | null
}

/**
 * The client spread over N worker threads, each streaming over connections of its own: the cell's
 * thread keeps the schedule, the bodies and the records, and hands each request to the worker
 * with the fewest in flight. Every timestamp, in any thread, is read from the one process-wide
 * clock (`monoMs`), so an observation from a worker compares with the slot time it was sent at.
 * A worker that crashes fails its requests in flight (`INTERNAL`, with its error) and takes no
 * more; the others go on.
 * @example
 * const workers = new StreamWorkers(2, { origin, api: 'chat', model, headers: null, deadlineMs: 60_000, connections: 64 })
 * const obs = await workers.send(body, NO_TEXT, signal)
 * await workers.close()
 */
export class StreamWorkers {
  readonly #lanes: Lane[]
  #nextId = 0

  constructor(count: number, setup: StreamWorkersSetup) {
    this.#lanes = Array.from({ length: count }, (_, index) => {
      const connections = setup.connections === null ? null : Math.max(1, Math.ceil(setup.connections / count))
      const workerData: WorkerSetup = { ...setup, worker: index, connections, ca: trustedCa(setup.origin) ?? null }
      const worker = new Worker(WORKER_URL, { workerData, stdout: false, stderr: false })
      worker.unref()
      const lane: Lane = { index, worker, ready: Promise.resolve(), pending: new Map(), dead: null, waiting: [] }
      lane.ready = new Promise<void>((resolve) => {
        lane.waiting.push((m) => {
          if (m.type !== 'ready') return false
          resolve()
          return true
        })
        // A worker that dies before it is ready must not leave a sender waiting.
        worker.once('exit', () => resolve())
      })
      worker.on('message', (m: FromWorker) => this.#onMessage(lane, m))
      worker.on('error', (error) => this.#kill(lane, `client worker ${index} failed: ${sanitizeMessage(error.message)}`))
      worker.on('exit', (code) => this.#kill(lane, `client worker ${index} exited (code ${code})`))
      return lane
    })
  }

  /** Worker threads started. */
  get count(): number {
    return this.#lanes.length
  }

  /**
   * Streams one request on the least busy live worker; never throws for a request failure. The
   * body is copied to the worker, so the caller's buffer is never detached.
   */
  async send(body: Buffer, capture: TextCapture, signal: AbortSignal): Promise<StreamObservation> {
    const handedAt = monoMs()
    const lane = this.#leastBusy()
    if (lane === null) return failedObservation(handedAt, 'every client worker has stopped')
    await lane.ready
    if (lane.dead !== null) return failedObservation(handedAt, lane.dead)
    const id = this.#nextId++
    return new Promise<StreamObservation>((resolve) => {
      const onAbort = (): void => this.#post(lane, { type: 'abort', id })
      lane.pending.set(id, { resolve, signal, onAbort, dispatchedAt: handedAt })
      if (signal.aborted) queueMicrotask(onAbort)
      else signal.addEventListener('abort', onAbort, { once: true })
      const copy = new Uint8Array(body)
      this.#post(lane, { type: 'send', id, body: copy, capture, handedAt }, [copy.buffer])
    })
  }

  /** Opens `connections` keep-alive connections, shared out over the workers. */
  async warm(connections: number): Promise<void> {
    const lanes = this.#live()
    const each = Math.ceil(connections / Math.max(1, lanes.length))
    await Promise.all(lanes.map((lane) => this.#ask(lane, { type: 'warm', connections: each }, 'warmed')))
  }

  /** The measured phase starts on every worker. */
  measureStart(): void {
    for (const lane of this.#live()) this.#post(lane, { type: 'measure-start' })
  }

  /** Each live worker's figures since `measureStart`, in worker order. */
  async measureStop(): Promise<WorkerMeasure[]> {
    const measures = await Promise.all(
      this.#live().map(async (lane) => {
        const reply = await this.#ask(lane, { type: 'measure-stop' }, 'measured')
        return reply?.type === 'measured' ? reply.measure : null
      }),
    )
    return measures.filter((m): m is WorkerMeasure => m !== null)
  }

  /** Closes every worker's pool and ends its thread. */
  async close(): Promise<void> {
    await Promise.all(
      this.#lanes.map(async (lane) => {
        if (lane.dead === null) await this.#ask(lane, { type: 'close' }, 'closed')
        await lane.worker.terminate()
      }),
    )
  }

  #live(): Lane[] {
    return this.#lanes.filter((lane) => lane.dead === null)
  }

  #leastBusy(): Lane | null {
    let best: Lane | null = null
    for (const lane of this.#lanes) {
      if (lane.dead !== null) continue
      if (best === null || lane.pending.size < best.pending.size) best = lane
    }
    return best
  }

  #post(lane: Lane, message: ToWorker, transfer: ArrayBuffer[] = []): void {
    if (lane.dead === null) lane.worker.postMessage(message, transfer)
  }

  /** Posts a message and waits for the reply of type `reply` (null when the worker died first). */
  #ask(lane: Lane, message: ToWorker, reply: FromWorker['type']): Promise<FromWorker | null> {
    return new Promise((resolve) => {
      if (lane.dead !== null) return resolve(null)
      lane.waiting.push((m) => {
        if (m.type !== reply) return false
        resolve(m)
        return true
      })
      lane.worker.once('exit', () => resolve(null))
      this.#post(lane, message)
    })
  }

  #onMessage(lane: Lane, m: FromWorker): void {
    if (m.type === 'done') {
      const pending = lane.pending.get(m.id)
      if (pending === undefined) return
      lane.pending.delete(m.id)
      pending.signal.removeEventListener('abort', pending.onAbort)
      pending.resolve(m.obs)
      return
    }
    const at = lane.waiting.findIndex((take) => take(m))
    if (at >= 0) lane.waiting.splice(at, 1)
  }

  #kill(lane: Lane, why: string): void {
    if (lane.dead !== null) return
    lane.dead = why
    for (const pending of lane.pending.values()) {
      pending.signal.removeEventListener('abort', pending.onAbort)
      pending.resolve(failedObservation(pending.dispatchedAt, why))
    }
    lane.pending.clear()
  }
}

/** The observation of a request no worker could stream. */
function failedObservation(at: number, why: string): StreamObservation {
  const obs = emptyObservation(at)
  obs.endAt = monoMs()
  obs.error = { code: 'INTERNAL', message: why, httpStatus: null, retryAfterS: null }
  return obs
}
