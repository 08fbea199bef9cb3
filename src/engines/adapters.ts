import type { LaunchedConfig } from './config.ts'

/** Where an engine reveals its version over HTTP, and how to read it. */
export interface VersionProbe {
  path: string
  /** Picks the version (and commit, where given) out of the JSON answer. */
  read(json: Record<string, unknown>): { version: string | null; commit: string | null }
}

/** What servegate knows about an engine kind. */
export interface EngineAdapter {
  /** The argv that launches it on 127.0.0.1:`port`. */
  argv(config: LaunchedConfig, port: number): string[]
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

/** vLLM: `vllm serve MODEL`; `/health`, `/version`, `/tokenize`, `/metrics`. */
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
    ...c.extraArgs,
  ],
  readiness: ['/health', '/v1/models'],
  versionHttp: [{ path: '/version', read: (j) => ({ version: str(j.version), commit: null }) }],
  versionArgv: (c) => [c.kind === 'vllm' ? c.executable : 'vllm', '--version'],
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

/** SGLang: `python -m sglang.launch_server`; `/health`, `/get_server_info`, `/metrics` with `--enable-metrics`. */
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
    ...c.extraArgs,
  ],
  readiness: ['/health', '/v1/models'],
  versionHttp: [
    { path: '/get_server_info', read: (j) => ({ version: str(j.version), commit: null }) },
    { path: '/version', read: (j) => ({ version: str(j.version), commit: null }) },
  ],
  versionArgv: () => null,
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

/** llama.cpp's `llama-server`: `/health`, `/props` (build info), `/tokenize`, `/metrics` with `--metrics`. */
const llamaServer: EngineAdapter = {
  argv: (c, port) => {
    const slots = c.kind === 'llama-server' ? c.slots : 1
    const threads = c.kind === 'llama-server' ? c.threads : 1
    return [
      c.kind === 'llama-server' ? c.executable : 'llama-server',
      '-m',
      c.model.path ?? c.model.id,
      '--alias',
      c.model.id,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '-np',
      String(slots),
      '-t',
      String(threads),
      // llama-server divides -c among its slots: each slot gets maxContext.
      ...optional('-c', c.maxContext === null ? null : c.maxContext * slots),
      '--metrics',
      ...c.extraArgs,
    ]
  },
  readiness: ['/health', '/v1/models'],
  versionHttp: [{ path: '/props', read: (j) => ({ version: str(j.build_info), commit: null }) }],
  versionArgv: (c) => [c.kind === 'llama-server' ? c.executable : 'llama-server', '--version'],
  tokenizerPath: '/tokenize',
  metricsPath: '/metrics',
}

/** TensorRT-LLM: `trtllm-serve MODEL`; `/health`, `/version`, `/metrics`. */
const trtllm: EngineAdapter = {
  argv: (c, port) => [
    c.kind === 'trtllm' ? c.executable : 'trtllm-serve',
    c.model.path ?? c.model.id,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--tp_size',
    String(c.tensorParallel),
    ...optional('--max_seq_len', c.maxContext),
    ...c.extraArgs,
  ],
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
    if (c.kind !== 'command') throw new Error('command adapter on a non-command config')
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
 * Parses a `--version` output: llama.cpp's `version: 0.4.0-dev (build 1, commit 80fb11a)` or
 * older `version: 6123 (abc1234)`, vLLM's `0.11.0`, or any `vX.Y.Z`.
 */
export function parseVersionOutput(text: string): { version: string | null; commit: string | null } {
  const llama = /version:\s*(\S+)\s*\((?:build \d+, commit )?([0-9a-f]{6,40})\)/i.exec(text)
  if (llama !== null) return { version: llama[1] ?? null, commit: llama[2] ?? null }
  const semver = /\bv?(\d+\.\d+(?:\.\d+)?(?:[.+-][\w.]+)?)\b/.exec(text)
  return { version: semver?.[1] ?? null, commit: null }
}
