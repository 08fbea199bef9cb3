import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { basename, resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import type { LaunchedConfig, ResolvedEngineConfig } from './config.ts'

/** Where an engine reveals its version over HTTP, and how to read it. */
interface VersionProbe {
  path: string
  /** Picks the version (and commit, where given) out of the JSON answer. */
  read(json: Record<string, unknown>): { version: string | null; commit: string | null }
}

/** Files an engine reads at start (name → content), written by the launcher beside its log. */
type EngineFiles = Readonly<Record<string, string>>

/** What the launcher knows before it builds the argv. */
interface LaunchFacts {
  /** Where each of the adapter's {@link EngineAdapter.files} was written, by name. */
  paths?: Readonly<Record<string, string>>
  /** Whether nvidia-smi shows a GPU on the host (llama-server's `gpuLayers: 'auto'`). @default false */
  gpuHost?: boolean
  /** The directory of the engine's log (llama-server's `--slot-save-path`, which its slot erase needs). */
  logDir?: string
}

/** Layers llama-server offloads to mean "all of them". */
const ALL_GPU_LAYERS = 999

/** What servegate knows about an engine kind. */
export interface EngineAdapter {
  /**
   * The argv that launches it on 127.0.0.1:`port`, given what the launcher found (see
   * {@link LaunchFacts}).
   */
  argv(config: LaunchedConfig, port: number, launch?: LaunchFacts): string[]
  /** Files to write before launch (TensorRT-LLM's extra options YAML), or none. */
  files?(config: LaunchedConfig): Promise<EngineFiles>
  /** Environment the engine gets unless the config sets the same names (vLLM's dev mode, for its cache reset). */
  env?: Readonly<Record<string, string>>
  /** The model name the engine serves (what `/v1/models` lists and requests must use). */
  servedModel(config: LaunchedConfig): string
  /** Paths polled until one answers 200 (all must, in order). */
  readiness: string[]
  /** HTTP version sources, tried in order. */
  versionHttp: VersionProbe[]
  /** An argv printing the version (run once, after launch), or null. */
  versionArgv(config: LaunchedConfig): string[] | null
  /** Where its tokenizer answers (see client/tokenize.ts for the body shapes). */
  tokenizerPath: string | null
  /** Its Prometheus endpoint, or null when it has none. */
  metricsPath: string | null
}

const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null)

const optional = (flag: string, value: string | number | null | undefined): string[] =>
  value === null || value === undefined ? [] : [flag, String(value)]

const asGiven = (c: LaunchedConfig): string => c.model.id

/** The flag, unless `extraArgs` already sets it (as `--flag`, `--flag value` or `--flag=value`). */
const unlessGiven = (extraArgs: readonly string[], flag: string, ...value: string[]): string[] =>
  extraArgs.some((a) => a === flag || a.startsWith(`${flag}=`)) ? [] : [flag, ...value]

/**
 * vLLM: `vllm serve MODEL`; `/health`, `/version`, `/tokenize`, `/metrics`. Launched with
 * `--enable-prompt-tokens-details` (its usage then reports cached prompt tokens) and
 * `VLLM_SERVER_DEV_MODE=1`, without which it serves no `POST /reset_prefix_cache`: servegate resets
 * the prefix cache before each cell whose workload reuses prefixes. The dev mode also mounts
 * vLLM's other development routes, on the loopback port servegate picked; set
 * `env: { VLLM_SERVER_DEV_MODE: '0' }` to launch without them (the reset is then recorded as not offered).
 */
const vllm: EngineAdapter = {
  argv: (c, port) => [
    c.kind === 'vllm' ? c.executable : 'vllm',
    'serve',
    c.model.path ?? c.model.id,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    ...(c.model.path !== undefined ? ['--served-model-name', c.model.id] : []),
    ...optional('--revision', c.model.path === undefined ? c.model.revision : null),
    '--tensor-parallel-size',
    String(c.tensorParallel),
    ...optional('--max-model-len', c.maxContext),
    ...unlessGiven(c.extraArgs, '--enable-prompt-tokens-details'),
    ...c.extraArgs,
  ],
  env: { VLLM_SERVER_DEV_MODE: '1' },
  readiness: ['/health', '/v1/models'],
  versionHttp: [{ path: '/version', read: (j) => ({ version: str(j.version), commit: null }) }],
  versionArgv: (c) => [c.kind === 'vllm' ? c.executable : 'vllm', '--version'],
  servedModel: asGiven,
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

/**
 * SGLang: `python -m sglang.launch_server`; `/health`, `/server_info` (its deprecated alias
 * `/get_server_info` on releases before it), `/metrics` with `--enable-metrics`, cached prompt
 * tokens in its usage with `--enable-cache-report`.
 */
const sglang: EngineAdapter = {
  argv: (c, port) => [
    c.kind === 'sglang' ? c.python : 'python',
    '-m',
    'sglang.launch_server',
    '--model-path',
    c.model.path ?? c.model.id,
    ...(c.model.path !== undefined ? ['--served-model-name', c.model.id] : []),
    ...optional('--revision', c.model.path === undefined ? c.model.revision : null),
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--tp-size',
    String(c.tensorParallel),
    ...optional('--context-length', c.maxContext),
    '--enable-metrics',
    ...unlessGiven(c.extraArgs, '--enable-cache-report'),
    ...c.extraArgs,
  ],
  readiness: ['/health', '/v1/models'],
  versionHttp: [
    { path: '/server_info', read: (j) => ({ version: str(j.version), commit: null }) },
    { path: '/get_server_info', read: (j) => ({ version: str(j.version), commit: null }) },
    { path: '/version', read: (j) => ({ version: str(j.version), commit: null }) },
  ],
  versionArgv: () => null,
  servedModel: asGiven,
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

/**
 * llama.cpp's `llama-server`: `/health`, `/props` (build info), `/tokenize`, `/metrics` with
 * `--metrics`. Local weights go by `-m`; a Hugging Face id without them by `-hf` (which takes
 * `<user>/<model>[:quant]` and has no revision option). Layers are offloaded with `-ngl` where
 * GPUs are requested or present (`gpuLayers`). `--slot-save-path` (the log directory; nothing is
 * saved there unless asked) lets servegate erase its slots' caches before a cell.
 */
const llamaServer: EngineAdapter = {
  argv: (c, port, launch = {}) => {
    const slots = c.kind === 'llama-server' ? c.slots : 1
    const threads = c.kind === 'llama-server' ? c.threads : null
    const configured = c.kind === 'llama-server' ? c.gpuLayers : null
    const gpuLayers = configured === 'auto' ? (c.gpus !== null || launch.gpuHost === true ? ALL_GPU_LAYERS : null) : configured
    const draft = c.kind === 'llama-server' && c.draftModel !== null ? c : null
    return [
      c.kind === 'llama-server' ? c.executable : 'llama-server',
      ...(c.model.path !== undefined ? ['-m', c.model.path] : ['-hf', c.model.id]),
      '--alias',
      c.model.id,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '-np',
      String(slots),
      ...optional('-t', threads),
      ...optional('-ngl', gpuLayers),
      // llama-server divides -c among its slots: each slot gets maxContext.
      ...optional('-c', c.maxContext === null ? null : c.maxContext * slots),
      // The draft runs where the model does.
      ...(draft === null
        ? []
        : ['-md', draft.draftModel as string, ...optional('--spec-type', draft.draftType), ...optional('-ngld', gpuLayers)]),
      '--metrics',
      ...(launch.logDir === undefined ? [] : unlessGiven(c.extraArgs, '--slot-save-path', resolve(launch.logDir))),
      ...c.extraArgs,
    ]
  },
  readiness: ['/health', '/v1/models'],
  versionHttp: [{ path: '/props', read: (j) => ({ version: str(j.build_info), commit: null }) }],
  versionArgv: (c) => [c.kind === 'llama-server' ? c.executable : 'llama-server', '--version'],
  servedModel: asGiven,
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

/** The options servegate needs in trtllm-serve's extra options YAML: Prometheus text, and the iteration gauges. */
const TRTLLM_REQUIRED_OPTIONS = { return_perf_metrics: true, enable_iter_perf_stats: true } as const

/** trtllm-serve's flag for its extra options YAML; `--config` is its alias from 1.1 on. */
const TRTLLM_OPTIONS_FLAGS = ['--extra_llm_api_options', '--config']
const TRTLLM_OPTIONS_FILE = 'extra-llm-api-options.yaml'

/** The user's own extra options file in `extraArgs` (`--flag path` or `--flag=path`), and the args without it. */
function userOptionsFile(extraArgs: readonly string[]): { path: string | null; rest: string[] } {
  const rest: string[] = []
  let path: string | null = null
  for (let i = 0; i < extraArgs.length; i++) {
    const arg = extraArgs[i] as string
    const eq = arg.indexOf('=')
    if (eq > 0 && TRTLLM_OPTIONS_FLAGS.includes(arg.slice(0, eq))) path = arg.slice(eq + 1)
    else if (TRTLLM_OPTIONS_FLAGS.includes(arg)) path = extraArgs[++i] ?? null
    else rest.push(arg)
  }
  return { path, rest }
}

function optionsFileUnreadable(source: string, path: string, error: unknown): ServegateError {
  const code = (error as NodeJS.ErrnoException).code
  const why = code === 'ENOENT' ? `ENOENT: no such file ${resolve(path)}` : (code ?? (error as Error).message)
  return new ServegateError(
    'CONFIG_INVALID',
    `${source}.extraArgs: the trtllm-serve options file ${path} cannot be read (${why}); fix the path`,
    {
      cause: error,
    },
  )
}

/**
 * Reads the files an engine's config names that servegate itself reads at launch (trtllm-serve's
 * own options file in `extraArgs`), as the launch will: a missing one fails when the engine is
 * declared, not after the engines before it spent minutes loading.
 * @param source how the config is named in the message, e.g. `engine` or `--engine engine.json`
 * @throws ServegateError CONFIG_INVALID naming the field, the path and the fix
 */
export function readEngineFiles(config: ResolvedEngineConfig, source = 'engine'): void {
  if (config.kind !== 'trtllm') return
  const { path } = userOptionsFile(config.extraArgs)
  if (path === null) return
  try {
    readFileSync(path, 'utf8')
  } catch (error) {
    throw optionsFileUnreadable(source, path, error)
  }
}

/**
 * trtllm-serve's extra options YAML: the user's own file (from `extraArgs`) with
 * {@link TRTLLM_REQUIRED_OPTIONS} appended where it does not set them at its top level. A key the
 * user set is left as set: `return_perf_metrics: false` then means no metrics, recorded as absent.
 * @example
 * trtllmOptionsYaml('return_perf_metrics: true\n')
 * // 'return_perf_metrics: true\n# added by servegate…\nenable_iter_perf_stats: true\n'
 */
export function trtllmOptionsYaml(userYaml: string): string {
  const setAtTop = (key: string): boolean => new RegExp(`^${key}\\s*:`, 'm').test(userYaml)
  const added = Object.entries(TRTLLM_REQUIRED_OPTIONS)
    .filter(([key]) => !setAtTop(key))
    .map(([key, value]) => `${key}: ${value}`)
  const user = userYaml.length === 0 || userYaml.endsWith('\n') ? userYaml : `${userYaml}\n`
  return `${user}${added.length > 0 ? `# added by servegate: /prometheus/metrics and its iteration gauges\n${added.join('\n')}\n` : ''}`
}

/**
 * TensorRT-LLM: `trtllm-serve MODEL`; `/health`, `/version`, Prometheus text at
 * `/prometheus/metrics`. servegate writes its extra options YAML itself (see
 * {@link trtllmOptionsYaml}). A local directory is served under its own name (trtllm-serve has no
 * served-model-name option), so that is the name requests and the metrics use.
 */
const trtllm: EngineAdapter = {
  argv: (c, port, launch = {}) => {
    const { rest } = userOptionsFile(c.extraArgs)
    const options = launch.paths?.[TRTLLM_OPTIONS_FILE]
    return [
      c.kind === 'trtllm' ? c.executable : 'trtllm-serve',
      c.model.path ?? c.model.id,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      ...optional('--revision', c.model.path === undefined ? c.model.revision : null),
      '--tp_size',
      String(c.tensorParallel),
      ...optional('--max_seq_len', c.maxContext),
      ...optional('--extra_llm_api_options', options),
      ...rest,
    ]
  },
  async files(c) {
    const { path } = userOptionsFile(c.extraArgs)
    let user = ''
    if (path !== null) {
      try {
        user = await readFile(path, 'utf8')
      } catch (error) {
        throw optionsFileUnreadable('engine', path, error)
      }
    }
    return { [TRTLLM_OPTIONS_FILE]: trtllmOptionsYaml(user) }
  },
  servedModel: (c) => (c.model.path === undefined ? c.model.id : basename(c.model.path.replace(/\/+$/, ''))),
  readiness: ['/health', '/v1/models'],
  versionHttp: [{ path: '/version', read: (j) => ({ version: str(j.version), commit: null }) }],
  versionArgv: () => null,
  tokenizerPath: null,
  // trtllm-serve serves Prometheus text under /prometheus/metrics (its /metrics is JSON stats).
  metricsPath: '/prometheus/metrics',
}

/** Any command: `{port}`, `{host}`, `{modelId}` and `{modelPath}` in its argv are filled in. */
const command: EngineAdapter = {
  argv: (c, port) => {
    if (c.kind !== 'command') throw new ServegateError('INTERNAL', 'command adapter on a non-command config')
    return c.argv.map((a) =>
      a
        .replaceAll('{port}', String(port))
        .replaceAll('{host}', '127.0.0.1')
        .replaceAll('{modelId}', c.model.id)
        .replaceAll('{modelPath}', c.model.path ?? ''),
    )
  },
  readiness: [],
  versionHttp: [{ path: '/version', read: (j) => ({ version: str(j.version), commit: str(j.commit) }) }],
  versionArgv: (c) => (c.kind === 'command' ? (c.versionArgv ?? null) : null),
  servedModel: asGiven,
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

export const ADAPTERS: Record<LaunchedConfig['kind'], EngineAdapter> = {
  vllm,
  sglang,
  'llama-server': llamaServer,
  trtllm,
  command,
}

/** The readiness paths of a launched config (a command's own health path). */
export function readinessPaths(config: LaunchedConfig): string[] {
  return config.kind === 'command' ? [config.healthPath] : ADAPTERS[config.kind].readiness
}

/**
 * SGLang's `--decode-log-interval` when the argv sets it (it refreshes its running gauge that
 * often), else null.
 * @example runningRefreshSteps(['python', '-m', 'sglang.launch_server', '--decode-log-interval', '10']) // 10
 */
export function runningRefreshSteps(argv: readonly string[] | null): number | null {
  if (argv === null) return null
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const value = arg === '--decode-log-interval' ? argv[i + 1] : arg.startsWith('--decode-log-interval=') ? arg.split('=')[1] : undefined
    const n = Number(value)
    if (value !== undefined && Number.isInteger(n) && n > 0) return n
  }
  return null
}

/**
 * Parses a `--version` output: llama.cpp's `version: 0.4.0-dev (build 1, commit 80fb11a)` or
 * older `version: 6123 (abc1234)`, vLLM's `0.11.0`, or any `vX.Y.Z`.
 */
export function parseVersionOutput(text: string): { version: string | null; commit: string | null } {
  const llama = /version:\s*(\S+)\s*\((?:build \d+, commit )?([0-9a-f]{6,40})\)/i.exec(text)
  if (llama !== null) return { version: llama[1] ?? null, commit: llama[2] ?? null }
  const semver = /\bv?(\d+\.\d+(?:\.\d+)?(?:[.+-][\w.]+)?)\b/.exec(text)
  return { version: semver?.[1] ?? null, commit: null }
}
