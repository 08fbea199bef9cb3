import { constants } from 'node:fs'
import { access, mkdir, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { delimiter, isAbsolute, join } from 'node:path'
import { httpRequest } from '../http-request.ts'
import { ServegateError } from '../errors.ts'
import { parseBaseUrl, trustCaFile } from '../loopback.ts'
import type { EngineTeardown, ErrorInfo, TeardownSurvivor } from '../schema/run.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { PhaseListener } from '../schema/progress.ts'
import { ADAPTERS, parseVersionOutput, readinessPaths } from './adapters.ts'
import { type EngineConfig, type LaunchedConfig, registerEngineSecrets, resolveEngineConfig } from './config.ts'
import { absent, harnessFacts, hostFacts, known, modelFingerprint, redactArgv } from './manifest-facts.ts'
import { queryReportedFacts } from './remote-facts.ts'
import { listeningSockets, portAccepts } from './launch-token.ts'
import { launchKubernetes } from './kubernetes.ts'
import { pollReadiness } from './readiness.ts'
import { huntPortListeners, settlePort } from './port-hunt.ts'
import { type EngineProcess, spawnEngine } from './process.ts'

type Fact = Manifest['engine']['version']

/** GPU facts for the manifest; injected so the engine layer does not depend on telemetry. */
export type GpuFactsProbe = (visibleDevices: string | null) => Promise<Manifest['gpus']>

/** GPU facts of a remote deployment from its DCGM exporter's metrics URL; injected for the same reason. */
type ExporterGpuFactsProbe = (metricsUrl: string) => Promise<Manifest['gpus']>

/** What a launch reads of the environment it runs in: the GPU probe, and where logs go unless the config says. */
export interface LaunchContext {
  readonly gpuFacts: GpuFactsProbe
  /** Reads an engine's `gpuMetricsUrl` (its GPUs are elsewhere); unset: such an engine's GPUs are unknown. */
  readonly exporterGpuFacts?: ExporterGpuFactsProbe
  readonly logDir: string
  /**
   * Whether each launch runs in a cgroup v2 of its own where one can be created (teardown then
   * kills the cgroup whole); false leaves it to the process tree, the launch token and the port.
   * @default true
   */
  readonly engineCgroups?: boolean
}

/** A ready engine: where to send requests, what it is, and how to stop it. */
export interface RunningEngine {
  kind: string
  /** Origin of an HTTP engine: loopback, or a remote external endpoint (see `access`). */
  baseUrl: string
  /** How a cell may reach `baseUrl`, for an external endpoint: `remote` allows another host, `caFile` verifies its TLS. */
  access?: { remote: boolean; caFile?: string }
  /** The model name requests must use. */
  model: string
  manifest: Manifest
  /** Prometheus endpoint, or null. */
  metricsUrl: string | null
  /** The process, for launched engines; null for an external endpoint. */
  process: EngineProcess | null
  /** Why the engine is no longer usable (it exited), or null while it runs. */
  failure(): ErrorInfo | null
  /**
   * Tears the engine down (the whole process tree, every process carrying its launch token, its
   * cgroup) and stops what still listens on the port servegate picked for it; idempotent. What
   * had to be hunted down is in the result and on stderr; null for an external endpoint (nothing
   * launched).
   */
  stop(): Promise<EngineTeardown | null>
}

/** A free loopback port, picked by the kernel. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() =>
        typeof address === 'object' && address !== null
          ? resolve(address.port)
          : reject(new ServegateError('INTERNAL', 'a loopback socket listened on port 0 but reported no port')),
      )
    })
  })
}

/**
 * Where `file` resolves to as an executable: itself when it is a path, else the first match in
 * the directories of `pathVar` (a PATH value); null when none is executable.
 * @example await onPath('chromium', process.env.PATH) // '/usr/bin/chromium'
 */
export async function onPath(file: string, pathVar: string | undefined): Promise<string | null> {
  const candidates =
    isAbsolute(file) || file.includes('/')
      ? [file]
      : (pathVar ?? '')
          .split(delimiter)
          .filter(Boolean)
          .map((d) => join(d, file))
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not here.
    }
  }
  return null
}

function engineEnv(config: LaunchedConfig): Record<string, string> {
  const env: Record<string, string> = {}
  for (const name of config.inheritEnv) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  Object.assign(env, ADAPTERS[config.kind].env, config.env)
  if (config.gpus !== null) env.CUDA_VISIBLE_DEVICES = config.gpus
  return env
}

async function getJson(url: string, timeoutMs: number): Promise<{ status: number; json: Record<string, unknown> | null }> {
  const res = await httpRequest(url, { signal: AbortSignal.timeout(timeoutMs) })
  const text = res.text
  try {
    const json = JSON.parse(text) as unknown
    return {
      status: res.statusCode,
      json: json !== null && typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : null,
    }
  } catch {
    return { status: res.statusCode, json: null }
  }
}

function exitedError(kind: string, proc: EngineProcess, when: string): ServegateError {
  const exit = proc.exit()
  const how = exit?.signal ? `signal ${exit.signal}` : `code ${exit?.code ?? 'unknown'}`
  return new ServegateError('ENGINE_EXITED', `engine ${kind} exited ${when} with ${how}; log ${proc.logPath}; log tail:\n${proc.logTail()}`)
}

/** Polls the readiness paths until each answers 200, the process exits, or the deadline passes. */
async function waitReady(
  config: LaunchedConfig,
  origin: string,
  proc: EngineProcess,
  signal?: AbortSignal,
  onPhase?: PhaseListener,
): Promise<void> {
  let exited = false
  void proc.exited.then(() => (exited = true))
  await pollReadiness(
    origin,
    readinessPaths(config),
    {
      timeoutMs: config.startupTimeoutMs,
      logPath: proc.logPath,
      stopped: () => (exited ? exitedError(config.kind, proc, 'during start-up') : null),
      timedOut: (path) =>
        new ServegateError(
          'ENGINE_START_TIMEOUT',
          `engine ${config.kind} was not ready (GET ${path} → 200) within ${config.startupTimeoutMs} ms; ` +
            `raise startupTimeoutMs or check the log ${proc.logPath}; log tail:\n${proc.logTail()}`,
        ),
      wake: proc.exited,
      interrupted: () => new ServegateError('REQUEST_ABORTED', `start-up of engine ${config.kind} was interrupted`),
    },
    signal,
    onPhase,
  )
}

async function versionFacts(config: LaunchedConfig, origin: string, env: Record<string, string>): Promise<{ version: Fact; commit: Fact }> {
  const adapter = ADAPTERS[config.kind]
  for (const probe of adapter.versionHttp) {
    try {
      const { status, json } = await getJson(`${origin}${probe.path}`, 3000)
      if (status !== 200 || json === null) continue
      const { version, commit } = probe.read(json)
      if (version !== null) {
        return {
          version: known(version, `GET ${probe.path}`),
          commit: commit === null ? absent(`GET ${probe.path} reports no commit`) : known(commit, `GET ${probe.path}`),
        }
      }
    } catch {
      // Try the next source.
    }
  }
  const argv = adapter.versionArgv(config)
  if (argv !== null) {
    const [file, ...args] = argv
    const { execa } = await import('execa')
    const result = await execa(file as string, args, { env, extendEnv: false, reject: false, timeout: 30_000, stdin: 'ignore', all: true })
    const parsed = parseVersionOutput(String(result.all ?? ''))
    if (result.exitCode === 0 && parsed.version !== null) {
      const source = argv.join(' ')
      return {
        version: known(parsed.version, source),
        commit: parsed.commit === null ? absent(`${source} prints no commit`) : known(parsed.commit, source),
      }
    }
  }
  const tried = [...adapter.versionHttp.map((p) => `GET ${p.path}`), ...(argv === null ? [] : [argv.join(' ')])]
  const reason = tried.length === 0 ? `engine ${config.kind} has no version source` : `no version from ${tried.join(', ')}`
  return { version: absent(reason), commit: absent(reason) }
}

/**
 * Launches an engine from its config (or connects to an external one), waits until it is
 * ready, and gathers its manifest. Nothing is left running when it throws. `onPhase` hears the
 * wait for readiness (every poll) and the manifest's gathering.
 * @throws ServegateError ENGINE_NOT_FOUND, ENGINE_EXITED (with the exit code and log tail),
 *   ENGINE_START_TIMEOUT, CONFIG_INVALID
 */
export async function launchEngine(
  input: EngineConfig,
  context: LaunchContext,
  signal?: AbortSignal,
  onPhase?: PhaseListener,
): Promise<RunningEngine> {
  const config = resolveEngineConfig(input)
  if (config.kind === 'node-llama-cpp') {
    throw new ServegateError(
      'CONFIG_INVALID',
      'engine.kind: node-llama-cpp runs in-process; use runEngineCell, which measures it through the in-process transport',
    )
  }
  if (config.kind === 'external') return connectExternal(config, context.gpuFacts, context.exporterGpuFacts)
  if (config.kind === 'kubernetes') {
    const connect = (external: ExternalConfig): Promise<RunningEngine> =>
      connectExternal(external, context.gpuFacts, context.exporterGpuFacts)
    return launchKubernetes(config, context, connect, signal, onPhase)
  }

  const port = config.port === 0 ? await freePort() : config.port
  const origin = `http://127.0.0.1:${port}`
  const adapter = ADAPTERS[config.kind]
  const stamp = new Date().toISOString().replace(/[-:.]/g, '')
  const logDir = config.logDir ?? context.logDir
  const paths = await writeEngineFiles(config, logDir, `${config.kind}-${stamp}-${port}`)
  // llama-server offloads its layers only where there is a GPU to offload them to.
  const gpuHost =
    config.kind === 'llama-server' && config.gpuLayers === 'auto' && config.gpus === null
      ? (await context.gpuFacts(null)).status === 'ok'
      : false
  const argv = adapter.argv(config, port, { paths, gpuHost, logDir })
  const env = engineEnv(config)
  registerEngineSecrets(config, env)
  const executable = argv[0] as string
  const resolved = await onPath(executable, env.PATH)
  if (resolved === null) {
    const field = config.kind === 'sglang' ? 'python' : config.kind === 'command' ? 'argv[0]' : 'executable'
    throw new ServegateError(
      'ENGINE_NOT_FOUND',
      `engine ${config.kind}: ${executable} is not an executable on the engine's PATH; install it or set engine.${field} to its path`,
    )
  }
  const proc = await spawnEngine({
    argv,
    executable: resolved,
    env,
    logPath: join(logDir, `${config.kind}-${stamp}-${port}.log`),
    graceMs: config.shutdownGraceMs,
    ownCgroup: context.engineCgroups ?? true,
  })
  const target: TeardownTarget = { kind: config.kind, port, allocated: config.port === 0, graceMs: config.shutdownGraceMs }
  try {
    await waitReady(config, origin, proc, signal, onPhase)
    onPhase?.({ phase: 'inspecting' })
    // Engines fork their workers before they are ready: know the whole tree now.
    await proc.track()
    const [versions, fingerprint, harness, gpus] = await Promise.all([
      versionFacts(config, origin, env),
      modelFingerprint(config.model),
      harnessFacts(),
      context.gpuFacts(config.gpus),
    ])
    const manifest: Manifest = {
      engine: {
        kind: config.kind,
        shape: 'http',
        version: versions.version,
        commit: versions.commit,
        argv: redactArgv(argv),
        envNames: Object.keys(env).sort(),
        visibleDevices: config.gpus,
        tensorParallel: config.tensorParallel,
      },
      model: { id: config.model.id, revision: config.model.revision, fingerprint },
      gpus,
      host: hostFacts(),
      harness,
    }
    const metricsPath = adapter.metricsPath
    let teardown: Promise<EngineTeardown> | null = null
    return {
      kind: config.kind,
      baseUrl: origin,
      model: adapter.servedModel(config),
      manifest,
      metricsUrl: metricsPath === null ? null : `${origin}${metricsPath}`,
      process: proc,
      failure() {
        const exit = proc.exit()
        if (exit === null || exit.requested) return null
        const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.code ?? 'unknown'}`
        return {
          code: 'ENGINE_EXITED',
          message: `engine ${config.kind} exited mid-cell with ${how}; log tail: ${proc.logTail()}`,
          httpStatus: null,
          retryAfterS: null,
        }
      },
      stop: () => (teardown ??= tearDown(target, proc)),
    }
  } catch (error) {
    await tearDown(target, proc)
    throw error
  }
}

/** Writes the files the adapter asks for beside the engine's log (`<prefix>-<name>`); their paths by name. */
async function writeEngineFiles(config: LaunchedConfig, dir: string, prefix: string): Promise<Record<string, string>> {
  const files = (await ADAPTERS[config.kind].files?.(config)) ?? {}
  const paths: Record<string, string> = {}
  if (Object.keys(files).length > 0) await mkdir(dir, { recursive: true })
  for (const [name, content] of Object.entries(files)) {
    const path = join(dir, `${prefix}-${name}`)
    await writeFile(path, content)
    paths[name] = path
  }
  return paths
}

function finding(kind: string, s: TeardownSurvivor): string {
  const who = `engine ${kind}: pid ${s.pid} (${s.command})`
  const how =
    s.endedBy === null ? 'could not be ended' : s.endedBy === 'SIGKILL' ? 'outlived SIGTERM, ended by SIGKILL' : 'ended by SIGTERM'
  const where =
    s.foundBy === 'launch-token'
      ? 'had left the process tree (found by its launch token)'
      : s.foundBy === 'cgroup'
        ? "had left the process tree and carried no launch token (found in the launch's cgroup)"
        : 'was in the process tree'
  return `${who} ${where}; ${how}`
}

/** What a launch's teardown needs besides its process: its port, whether servegate picked it, the grace. */
interface TeardownTarget {
  kind: string
  port: number
  allocated: boolean
  graceMs: number
}

/**
 * Stops the launch's processes, then makes sure nothing listens on its loopback port: a listener
 * that is the launch's (it carries the launch token, or it holds the port servegate picked for
 * it: see huntPortListeners) is stopped; any other is reported and left alone. Every finding
 * goes to stderr too, so a leak is never silent.
 */
async function tearDown(target: TeardownTarget, proc: EngineProcess): Promise<EngineTeardown> {
  const { kind, port } = target
  // Read before the stop: a socket listening while the engine held the port is the launch's.
  const socketsAtStop = listeningSockets(port)
  const { survivors, confinement } = await proc.stop()
  const found = [...survivors]
  const findings = survivors.map((s) => finding(kind, s))
  await settlePort(port)
  let portClosed = !(await portAccepts(port))
  if (!portClosed) {
    const hunted = await huntPortListeners({ ...target, token: proc.launchToken, startTicks: proc.startTicks, socketsAtStop })
    for (const h of hunted) {
      found.push(h.survivor)
      findings.push(h.finding)
    }
    portClosed = !(await portAccepts(port))
  }
  if (!portClosed) findings.push(`engine ${kind}: 127.0.0.1:${port} still accepts connections after teardown`)
  for (const line of findings) process.stderr.write(`servegate: teardown: ${line}\n`)
  return { survivors: found, portClosed, findings, confinement }
}

type ExternalConfig = Extract<ReturnType<typeof resolveEngineConfig>, { kind: 'external' }>

/**
 * An external endpoint's GPU facts: from its DCGM exporter when `gpuMetricsUrl` names one;
 * unknown for a remote host without one (nvidia-smi here cannot see its GPUs); else nvidia-smi here.
 */
async function externalGpuFacts(
  config: ExternalConfig,
  offHost: boolean,
  gpuFacts: GpuFactsProbe,
  exporterGpuFacts: ExporterGpuFactsProbe | undefined,
): Promise<Manifest['gpus']> {
  if (config.gpuMetricsUrl !== undefined) {
    return exporterGpuFacts === undefined
      ? { status: 'unknown', reason: 'a gpuMetricsUrl was given but this launch context reads no DCGM exporter' }
      : exporterGpuFacts(config.gpuMetricsUrl)
  }
  if (offHost) {
    return {
      status: 'unknown',
      reason:
        'the engine is on another host, whose GPUs nvidia-smi here cannot see; ' +
        "set gpuMetricsUrl (--gpu-metrics-url) to its DCGM exporter's metrics URL",
    }
  }
  return gpuFacts(null)
}

async function connectExternal(
  config: ExternalConfig,
  gpuFacts: GpuFactsProbe,
  exporterGpuFacts?: ExporterGpuFactsProbe,
): Promise<RunningEngine> {
  const { origin, host, remote } = parseBaseUrl(config.baseUrl, config.remote)
  trustCaFile(origin, config.caFile, 'engine.caFile')
  let version: Fact = absent('no version endpoint answered (tried GET /version, /server_info, /get_server_info, /props)')
  for (const [path, key] of [
    ['/version', 'version'],
    ['/server_info', 'version'],
    ['/get_server_info', 'version'],
    ['/props', 'build_info'],
  ] as const) {
    try {
      const { status, json } = await getJson(`${origin}${path}`, 3000)
      const value = json?.[key]
      if (status === 200 && typeof value === 'string' && value !== '') {
        version = known(value, `GET ${path}`)
        break
      }
    } catch {
      // Try the next source.
    }
  }
  // Facts from the endpoint itself only where asked for a remote deployment: a loopback record stays as it was.
  const asksRemoteFacts = config.remote || config.gpuMetricsUrl !== undefined
  const [fingerprint, harness, gpus, reported] = await Promise.all([
    modelFingerprint(config.model),
    harnessFacts(),
    externalGpuFacts(config, remote, gpuFacts, exporterGpuFacts),
    asksRemoteFacts ? queryReportedFacts(origin, config.model.id) : undefined,
  ])
  return {
    kind: 'external',
    baseUrl: origin,
    model: config.model.id,
    manifest: {
      engine: {
        kind: 'external',
        shape: 'http',
        version,
        commit: absent('an external endpoint reports no commit'),
        argv: null,
        envNames: [],
        visibleDevices: null,
        tensorParallel: null,
        ...(reported === undefined ? {} : { reported }),
      },
      model: { id: config.model.id, revision: config.model.revision, fingerprint },
      gpus,
      host: hostFacts(),
      harness,
      ...(config.remote ? { target: { host, remote, tls: origin.startsWith('https:') } } : {}),
    },
    access: { remote: config.remote, ...(config.caFile === undefined ? {} : { caFile: config.caFile }) },
    metricsUrl: `${origin}/metrics`,
    process: null,
    failure: () => null,
    stop: async () => null,
  }
}
