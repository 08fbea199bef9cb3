import { access, appendFile, mkdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { sanitizeMessage, scrubCredentials, ServegateError } from '../errors.ts'
import { parseBaseUrl, trustCaFile } from '../loopback.ts'
import { registerSecret } from '../secrets.ts'
import type { PhaseListener } from '../schema/progress.ts'
import type { EngineTeardown, ReleaseTeardown } from '../schema/run.ts'
import type { ResolvedEngineConfig } from './config.ts'
import type { LaunchContext, RunningEngine } from './launch.ts'
import { pollReadiness } from './readiness.ts'

/** A `kind: 'kubernetes'` config, resolved. */
export type KubernetesConfig = Extract<ResolvedEngineConfig, { kind: 'kubernetes' }>
type ExternalConfig = Extract<ResolvedEngineConfig, { kind: 'external' }>

/**
 * A launch that failed after kubectl or helm had started to deploy: the failure, with how the
 * partial deployment was torn down (the runner puts that in the failed cell's record).
 */
export class DeploymentFailed extends ServegateError {
  readonly teardown: EngineTeardown
  constructor(error: ServegateError, teardown: EngineTeardown) {
    super(error.code, `${error.message}; ${teardownSummary(teardown)}`, { cause: error })
    this.teardown = teardown
  }
}

/** `--timeout` as kubectl and helm read it: whole seconds, at least one. */
const seconds = (ms: number): string => `${Math.max(1, Math.ceil(ms / 1000))}s`

function kubectl(config: KubernetesConfig, ...args: string[]): string[] {
  return [
    config.kubectl,
    ...(config.context === undefined ? [] : ['--context', config.context]),
    ...(config.kubeconfig === undefined ? [] : ['--kubeconfig', config.kubeconfig]),
    ...args,
    '-n',
    config.namespace,
  ]
}

function helm(config: KubernetesConfig, release: NonNullable<KubernetesConfig['helm']>, ...args: string[]): string[] {
  return [
    release.executable,
    ...(config.context === undefined ? [] : ['--kube-context', config.context]),
    ...(config.kubeconfig === undefined ? [] : ['--kubeconfig', config.kubeconfig]),
    ...args,
    '-n',
    config.namespace,
  ]
}

/**
 * The argv that deploys: `kubectl apply -f FILE`, or `helm install RELEASE CHART --wait` with its
 * values files, `--set`s and version (helm waits for its own resources until `timeoutMs`).
 * @example applyArgv(resolveEngineConfig({ kind: 'kubernetes', baseUrl: 'http://gw:80', model: { id: 'm' }, manifest: 'vllm.yaml' }), 60_000)
 * // ['kubectl', 'apply', '-f', 'vllm.yaml', '-n', 'default']
 */
export function applyArgv(config: KubernetesConfig, timeoutMs: number): string[] {
  const release = config.helm
  if (release === undefined) return kubectl(config, 'apply', '-f', config.manifest as string)
  return helm(
    config,
    release,
    'install',
    release.release,
    release.chart,
    '--wait',
    '--timeout',
    seconds(timeoutMs),
    ...release.values.flatMap((file) => ['-f', file]),
    ...Object.entries(release.set).flatMap(([key, value]) => ['--set', `${key}=${value}`]),
    ...(release.version === undefined ? [] : ['--version', release.version]),
  )
}

/** The argvs that wait for the deployment, in order: each rollout (`kubectl rollout status`), then each condition (`kubectl wait`). */
export function waitArgvs(config: KubernetesConfig, timeoutMs: number): string[][] {
  const timeout = `--timeout=${seconds(timeoutMs)}`
  return [
    ...config.rollout.map((target) => kubectl(config, 'rollout', 'status', target, timeout)),
    ...config.wait.map((w) => kubectl(config, 'wait', `--for=condition=${w.condition}`, w.resource, timeout)),
  ]
}

/**
 * The argv that removes the deployment and waits until its objects are gone: `kubectl delete -f
 * FILE --wait=true` or `helm uninstall RELEASE --wait`, both with foreground cascading (a
 * Deployment goes only once its pods have).
 */
export function removeArgv(config: KubernetesConfig): string[] {
  const timeout = seconds(config.teardownTimeoutMs)
  const release = config.helm
  if (release === undefined) {
    const file = config.manifest as string
    return kubectl(config, 'delete', '-f', file, '--wait=true', '--cascade=foreground', '--ignore-not-found', `--timeout=${timeout}`)
  }
  return helm(config, release, 'uninstall', release.release, '--wait', '--cascade', 'foreground', '--timeout', timeout)
}

/** The argv that checks nothing is left: `helm status RELEASE` (fails "release: not found") or `kubectl get -f FILE` (lists nothing). */
export function checkArgv(config: KubernetesConfig): string[] {
  const release = config.helm
  if (release === undefined) return kubectl(config, 'get', '-f', config.manifest as string, '-o', 'name', '--ignore-not-found')
  return helm(config, release, 'status', release.release)
}

/** Whether the check's outcome says the deployment is gone. */
function isGone(config: KubernetesConfig, check: ToolResult): boolean {
  if (config.helm !== undefined) return check.exitCode === 1 && /release: not found/.test(check.stderr)
  return check.exitCode === 0 && check.stdout.trim() === ''
}

/** A `--set` key whose value is a secret: a token, key, secret, password or credential. */
const SECRET_KEY = /token|key|secret|password|credential/i

/** The argv as written to logs, records and messages: `--set` values of secret-looking keys redacted. */
export function shownArgv(argv: readonly string[]): string[] {
  return argv.map((arg, i) => {
    if (argv[i - 1] !== '--set') return arg
    const eq = arg.indexOf('=')
    return eq > 0 && SECRET_KEY.test(arg.slice(0, eq)) ? `${arg.slice(0, eq)}=[redacted]` : arg
  })
}

/** Registers the values of secret-looking `--set` keys, so the tools' echoes of them are scrubbed wherever servegate writes. */
function registerSetSecrets(config: KubernetesConfig): void {
  for (const [key, value] of Object.entries(config.helm?.set ?? {})) {
    // As for a secret environment variable by its name: 8 characters or more, so `true` or `1` is never scrubbed.
    if (SECRET_KEY.test(key) && value.length >= 8) registerSecret(value)
  }
}

interface ToolResult {
  /** Null when the tool did not exit by itself (not found, killed at its deadline, cancelled). */
  exitCode: number | null
  stdout: string
  stderr: string
  notFound: boolean
  timedOut: boolean
  cancelled: boolean
}

/** Runs kubectl or helm from an argv (never a shell), its output appended to the launch's log. */
class ToolRunner {
  readonly logPath: string
  #ready: Promise<void> | null = null

  constructor(logPath: string) {
    this.logPath = logPath
  }

  async run(argv: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<ToolResult> {
    const [file, ...args] = argv as [string, ...string[]]
    const { execa } = await import('execa')
    const r = await execa(file, args, {
      reject: false,
      stdin: 'ignore',
      timeout: Math.ceil(timeoutMs),
      forceKillAfterDelay: 2000,
      ...(signal === undefined ? {} : { cancelSignal: signal }),
    })
    const result: ToolResult = {
      exitCode: typeof r.exitCode === 'number' ? r.exitCode : null,
      stdout: String(r.stdout ?? ''),
      stderr: String(r.stderr ?? ''),
      notFound: (r as { code?: string }).code === 'ENOENT',
      timedOut: r.timedOut,
      cancelled: r.isCanceled,
    }
    await this.#log(argv, result)
    return result
  }

  /** Appends the call and its output to the log; a log that cannot be written never stops a deployment's removal. */
  async #log(argv: readonly string[], r: ToolResult): Promise<void> {
    const how = r.notFound ? 'not found' : r.timedOut ? 'killed at its deadline' : r.cancelled ? 'cancelled' : `exit ${r.exitCode}`
    const text = `$ ${shownArgv(argv).join(' ')}\n${r.stdout}${r.stdout.endsWith('\n') || r.stdout === '' ? '' : '\n'}${r.stderr}${
      r.stderr.endsWith('\n') || r.stderr === '' ? '' : '\n'
    }(${how})\n`
    try {
      this.#ready ??= mkdir(dirname(this.logPath), { recursive: true }).then(() => {})
      await this.#ready
      await appendFile(this.logPath, scrubCredentials(text))
    } catch (error) {
      process.stderr.write(
        `servegate: cannot write ${this.logPath} (${(error as NodeJS.ErrnoException).code ?? 'error'}); kubectl/helm output not kept\n`,
      )
    }
  }
}

/** The tool's last words, scrubbed of secrets and bounded: what a failure's message carries. */
const tail = (r: ToolResult): string => sanitizeMessage((r.stderr.trim() || r.stdout.trim()).slice(-1500), 1500)

/** The error for a tool call that did not succeed during the launch. */
function launchError(argv: readonly string[], r: ToolResult, config: KubernetesConfig): ServegateError {
  const command = shownArgv(argv).join(' ')
  if (r.cancelled) return new ServegateError('REQUEST_ABORTED', `start-up of engine kubernetes was interrupted during \`${command}\``)
  if (r.notFound) {
    const field = argv[0] === config.kubectl ? 'kubectl' : 'helm.executable'
    return new ServegateError(
      'ENGINE_NOT_FOUND',
      `engine kubernetes: ${argv[0]} is not an executable on servegate's PATH; install it or set engine.${field} to its path`,
    )
  }
  if (r.timedOut || /timed out waiting for the condition|context deadline exceeded/.test(r.stderr)) {
    return new ServegateError(
      'ENGINE_START_TIMEOUT',
      `engine kubernetes was not ready: \`${command}\` timed out within startupTimeoutMs (${config.startupTimeoutMs} ms); ` +
        `raise startupTimeoutMs or look at the workload (kubectl describe, kubectl logs); its output: ${tail(r)}`,
    )
  }
  return new ServegateError('ENGINE_DEPLOY_FAILED', `engine kubernetes: \`${command}\` failed (exit ${r.exitCode}): ${tail(r)}`)
}

/** Refuses a manifest or a values file that is not there, before any tool runs. */
async function checkFiles(config: KubernetesConfig): Promise<void> {
  const files: Array<[string, string]> =
    config.helm === undefined
      ? [['engine.manifest', config.manifest as string]]
      : config.helm.values.map((file, i): [string, string] => [`engine.helm.values[${i}]`, file])
  for (const [field, file] of files) {
    try {
      await access(file)
    } catch (error) {
      throw new ServegateError('CONFIG_INVALID', `invalid engine config: ${field}: no file at ${file}; fix the path`, { cause: error })
    }
  }
}

/**
 * Removes the deployment (`kubectl delete -f` / `helm uninstall`, waiting for its objects to go),
 * then checks it is gone (`kubectl get -f` lists nothing / `helm status` finds no release). What
 * did not go is a finding, on stderr too, so a leak is never silent. Never throws.
 */
async function removeDeployment(config: KubernetesConfig, tools: ToolRunner): Promise<EngineTeardown> {
  const findings: string[] = []
  const grace = 30_000
  const remove = removeArgv(config)
  const removed = await tools.run(remove, config.teardownTimeoutMs + grace)
  // A release never created (its install failed first) is not found: nothing to remove.
  const absentRelease = config.helm !== undefined && /release: not found/.test(removed.stderr)
  if (removed.exitCode !== 0 && !absentRelease) {
    findings.push(`engine kubernetes: \`${shownArgv(remove).join(' ')}\` failed (${removed.exitCode ?? 'no exit'}): ${tail(removed)}`)
  }
  const check = checkArgv(config)
  const checked = await tools.run(check, config.teardownTimeoutMs + grace)
  const gone = isGone(config, checked)
  if (!gone) {
    const what = config.helm === undefined ? `objects of ${config.manifest}` : `Helm release ${config.helm.release}`
    findings.push(
      `engine kubernetes: ${what} may be left in namespace ${config.namespace}: \`${shownArgv(check).join(' ')}\` → ` +
        `${checked.exitCode ?? 'no exit'}: ${tail(checked) || '(no output)'}`,
    )
  }
  for (const line of findings) process.stderr.write(`servegate: teardown: ${line}\n`)
  const release: ReleaseTeardown = {
    tool: config.helm === undefined ? 'kubectl' : 'helm',
    name: config.helm?.release ?? (config.manifest as string),
    namespace: config.namespace,
    removed: gone,
    checkedWith: shownArgv(check).join(' '),
  }
  return { survivors: [], portClosed: true, findings, release }
}

function teardownSummary(t: EngineTeardown): string {
  const r = t.release
  if (r === undefined) return 'nothing was torn down'
  return r.removed
    ? `the partial deployment was torn down (${r.tool}; \`${r.checkedWith}\` finds nothing left)`
    : `the partial deployment may be left: ${t.findings.join('; ')}`
}

/**
 * Deploys on Kubernetes through kubectl or helm, waits for the rollouts and conditions, then for
 * the gateway at `baseUrl` to answer `healthPath`, and gathers the manifest as for an external
 * endpoint (`connect`). On any failure, or an abort, the partial deployment is torn down before
 * this throws a {@link DeploymentFailed}. `stop()` of the result tears it down once.
 * @throws ServegateError CONFIG_INVALID (a missing manifest or values file, before any tool runs),
 *   ENGINE_NOT_FOUND; DeploymentFailed with ENGINE_DEPLOY_FAILED, ENGINE_START_TIMEOUT or REQUEST_ABORTED
 */
export async function launchKubernetes(
  config: KubernetesConfig,
  context: Pick<LaunchContext, 'logDir'>,
  connect: (external: ExternalConfig) => Promise<RunningEngine>,
  signal?: AbortSignal,
  onPhase?: PhaseListener,
): Promise<RunningEngine> {
  await checkFiles(config)
  registerSetSecrets(config)
  const { origin } = parseBaseUrl(config.baseUrl, true)
  trustCaFile(origin, config.caFile, 'engine.caFile')
  const stamp = new Date().toISOString().replace(/[-:.]/g, '')
  const tools = new ToolRunner(join(context.logDir, `kubernetes-${config.helm?.release ?? 'manifest'}-${stamp}.log`))
  const deadline = performance.now() + config.startupTimeoutMs
  const left = (): number => Math.max(1, deadline - performance.now())
  const apply = applyArgv(config, config.startupTimeoutMs)
  const applied = await tools.run(apply, left() + 30_000, signal)
  // Not found: nothing was deployed, and the same tool could remove nothing.
  if (applied.notFound) throw launchError(apply, applied, config)
  let teardown: Promise<EngineTeardown> | null = null
  const stop = (): Promise<EngineTeardown> => (teardown ??= removeDeployment(config, tools))
  try {
    if (applied.exitCode !== 0) throw launchError(apply, applied, config)
    // Each wait gets what is left of the deadline when it starts.
    for (let i = 0; i < config.rollout.length + config.wait.length; i++) {
      const argv = waitArgvs(config, left())[i] as string[]
      onPhase?.({
        phase: 'waiting',
        elapsedMs: config.startupTimeoutMs - left(),
        timeoutMs: config.startupTimeoutMs,
        logPath: tools.logPath,
      })
      const r = await tools.run(argv, left() + 30_000, signal)
      if (r.exitCode !== 0) throw launchError(argv, r, config)
    }
    await pollReadiness(
      origin,
      [config.healthPath],
      {
        timeoutMs: left(),
        logPath: tools.logPath,
        stopped: () => null,
        timedOut: (path) =>
          new ServegateError(
            'ENGINE_START_TIMEOUT',
            `engine kubernetes was deployed but ${origin} did not answer GET ${path} with 200 within startupTimeoutMs ` +
              `(${config.startupTimeoutMs} ms); check the gateway or Service behind baseUrl, or raise startupTimeoutMs`,
          ),
        interrupted: () => new ServegateError('REQUEST_ABORTED', 'start-up of engine kubernetes was interrupted'),
      },
      signal,
      onPhase,
    )
    onPhase?.({ phase: 'inspecting' })
    const external = await connect({
      kind: 'external',
      baseUrl: config.baseUrl,
      model: config.model,
      remote: true,
      ...(config.caFile === undefined ? {} : { caFile: config.caFile }),
      ...(config.gpuMetricsUrl === undefined ? {} : { gpuMetricsUrl: config.gpuMetricsUrl }),
    })
    return {
      ...external,
      kind: 'kubernetes',
      manifest: { ...external.manifest, engine: { ...external.manifest.engine, kind: 'kubernetes', argv: shownArgv(apply) } },
      stop: stop,
    }
  } catch (error) {
    const down = await stop()
    if (error instanceof ServegateError) throw new DeploymentFailed(error, down)
    throw error
  }
}
