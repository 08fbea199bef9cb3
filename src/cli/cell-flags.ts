import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { ENGINE_KINDS, type EngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { ServegateError } from '../errors.ts'
import { loadTrace } from '../load/trace.ts'
import type { ArrivalSpec } from '../load/arrival-spec.ts'
import { type CellPlan, closest } from '../runner/cell-options.ts'
import { MAX_CLIENT_WORKERS } from '../runner/client-workers.ts'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import type { SLO } from '../schema/load.ts'
import { simCommandConfig, type SimEngineConfig } from '../sim/sim-engine.ts'
import { loadConversations } from '../workload/conversation-file.ts'
import { loadDataset } from '../workload/dataset.ts'
import { MIN_MAX_TOKENS, MIN_PROMPT_TOKENS } from '../workload/lengths.ts'
import { WORKLOAD_KINDS, type WorkloadSpec } from '../workload/workload-spec.ts'
import { inRange, intFlag, type LowerBound, type parseFlags, rangeText } from './flags.ts'
import { lengthFlag } from './length-flags.ts'
import { checkReadableFile } from './path-flags.ts'

/**
 * Upper bounds of the count flags: a cell's requests and their records are held in memory, so a
 * million requests (a few GiB of record at most) is the largest cell; measure more as several
 * cells (one record each, compared as repeats).
 */
const MAX_REQUESTS = 1_000_000
/** Warm-up requests are sent and not recorded: more than this is a typo, not a warm-up. */
const MAX_WARMUP = 100_000
/** `--max-tokens` and `--prompt-tokens`: no served model's context is larger (the real limit is checked against the engine). */
const MAX_TOKENS_FLAG = 10_000_000

/** The flags that say where to measure: an endpoint that is up, or an engine to launch. */
export const TARGET_FLAGS = {
  'base-url': { type: 'string' },
  engine: { type: 'string' },
  model: { type: 'string' },
  'api-key-env': { type: 'string' },
  'nvidia-smi': { type: 'string' },
  remote: { type: 'boolean' },
  'ca-file': { type: 'string' },
} as const

/**
 * The one environment of this invocation, from its flags: the nvidia-smi that both the manifest's
 * GPU facts and the sampler use.
 */
export function environmentFromFlags(values: { 'nvidia-smi'?: string | undefined }): Environment {
  return createEnvironment({ nvidiaSmi: values['nvidia-smi'] })
}

/** The flags of what one cell sends: API, sizes, workload, sampling, deadline. */
export const WORKLOAD_FLAGS = {
  api: { type: 'string' },
  requests: { type: 'string' },
  warmup: { type: 'string' },
  'max-tokens': { type: 'string' },
  workload: { type: 'string' },
  dataset: { type: 'string' },
  'prompt-tokens': { type: 'string' },
  seed: { type: 'string' },
  'prefix-cache': { type: 'string' },
  canaries: { type: 'boolean' },
  'output-control': { type: 'string' },
  'output-knob': { type: 'string' },
  temperature: { type: 'string' },
  'top-p': { type: 'string' },
  'sampling-seed': { type: 'string' },
  'reasoning-effort': { type: 'string' },
  thinking: { type: 'string' },
  'no-calibrate': { type: 'boolean' },
  sessions: { type: 'string' },
  turns: { type: 'string' },
  conversations: { type: 'string' },
  'user-tokens': { type: 'string' },
  'system-tokens': { type: 'string' },
  'assistant-tokens': { type: 'string' },
  'think-time-ms': { type: 'string' },
  history: { type: 'string' },
  'max-tokens-per-chunk': { type: 'string' },
  'no-retokenize': { type: 'boolean' },
  'requests-per-slot-floor': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
  cancel: { type: 'string' },
  'send-lag-limit-ms': { type: 'string' },
  'event-loop-delay-limit-ms': { type: 'string' },
  'client-workers': { type: 'string' },
} as const

/** The flags that shape open-loop arrivals (the rate itself is `--rate` or the searched value) and the SLO that judges the load. */
export const LOAD_FLAGS = {
  arrival: { type: 'string' },
  burstiness: { type: 'string' },
  'arrival-seed': { type: 'string' },
  'ramp-up-s': { type: 'string' },
  'ramp-up-from': { type: 'string' },
  'max-in-flight': { type: 'string' },
  slo: { type: 'string' },
} as const

/** How one cell's requests arrive: a closed loop's concurrency, an open loop's rate, or a trace (run, calibrate). */
export const ARRIVAL_FLAGS = {
  concurrency: { type: 'string' },
  rate: { type: 'string' },
  trace: { type: 'string' },
  'trace-time-scale': { type: 'string' },
  'trace-block-tokens': { type: 'string' },
} as const

type FlagSpec = typeof TARGET_FLAGS & typeof WORKLOAD_FLAGS & typeof LOAD_FLAGS
/** Parsed values of the shared cell flags (each command adds its own). */
export type CellFlagValues = Partial<ReturnType<typeof parseFlags<FlagSpec>>['values']>

export function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined
  if ((allowed as readonly string[]).includes(value)) return value as T
  throw new ServegateError('CONFIG_INVALID', `${flag}: "${value}" is not valid; pass one of ${allowed.join(', ')}`)
}

/**
 * Parses a number flag value within `min` (inclusive, or `{ above: n }`) and `max`, or throws
 * naming the flag and the range as people write it.
 * @example numberFlag('--top-p', '7', { above: 0 }, 1) // throws '--top-p: "7" is not valid; pass a number > 0 and ≤ 1'
 */
export function numberFlag(flag: string, value: string | undefined, min: LowerBound, max: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n) || !inRange(n, min, max)) {
    throw new ServegateError('CONFIG_INVALID', `${flag}: "${value}" is not valid; pass a number ${rangeText(min, max)}`)
  }
  return n
}

/** `--client-workers auto|N`: the client's worker threads (0 streams in the cell's thread). */
function clientWorkersFlag(value: string | undefined): number | 'auto' | undefined {
  if (value === undefined || value === 'auto') return value
  return intFlag('--client-workers', value, 0, MAX_CLIENT_WORKERS)
}

/**
 * `--cancel SHARE@MS`: abort a seeded share of the measured requests MS ms after each is sent.
 * @example cancelFlag('0.2@500') // { share: 0.2, afterMs: 500 }
 * @throws ServegateError `CONFIG_INVALID` naming the flag and the form
 */
export function cancelFlag(value: string | undefined): CellPlan['cancel'] {
  if (value === undefined) return undefined
  const [share = '', afterMs = '', ...rest] = value.split('@')
  const s = Number(share)
  const ms = Number(afterMs)
  if (rest.length > 0 || share.trim() === '' || afterMs.trim() === '' || !(s > 0 && s <= 1) || !(Number.isFinite(ms) && ms >= 0)) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `--cancel: "${value}" is not valid; pass SHARE@MS with 0 < SHARE ≤ 1 and MS ≥ 0, ` +
        'e.g. --cancel 0.2@500 (a fifth of the requests aborted 500 ms after each is sent)',
    )
  }
  return { share: s, afterMs: ms }
}

function prefixCacheFlag(value: string | undefined): WorkloadSpec['prefixCache'] {
  if (value === undefined || value === 'unique') return undefined
  const shared = /^shared:(\d+)$/.exec(value)
  if (shared === null)
    throw new ServegateError('CONFIG_INVALID', `--prefix-cache: "${value}" is not valid; pass unique or shared:N (N shared prefix tokens)`)
  return { mode: 'shared', tokens: intFlag('--prefix-cache shared:N', shared[1], 1) as number }
}

/** The workload part of the flags. */
function workloadFlags(values: CellFlagValues): WorkloadSpec {
  const thinking = oneOf('--thinking', values.thinking, ['on', 'off'])
  return {
    kind: oneOf('--workload', values.workload, WORKLOAD_KINDS) ?? (values.dataset === undefined ? undefined : 'dataset'),
    datasetPath: values.dataset,
    promptTokens: lengthFlag('--prompt-tokens', values['prompt-tokens'], MIN_PROMPT_TOKENS),
    seed: intFlag('--seed', values.seed, 0),
    prefixCache: prefixCacheFlag(values['prefix-cache']),
    canaries: values.canaries === true,
    outputControl: {
      mode: oneOf('--output-control', values['output-control'], ['none', 'observe', 'strict'] as const),
      knob: oneOf('--output-knob', values['output-knob'], ['ignore_eos', 'min_tokens'] as const),
    },
    sampling: {
      temperature: numberFlag('--temperature', values.temperature, 0, 2),
      topP: numberFlag('--top-p', values['top-p'], { above: 0 }, 1),
      seed: intFlag('--sampling-seed', values['sampling-seed'], 0),
      reasoningEffort: oneOf('--reasoning-effort', values['reasoning-effort'], ['low', 'medium', 'high'] as const),
      thinking: thinking === undefined ? undefined : thinking === 'on' ? 'enabled' : 'disabled',
    },
    requestsPerSlotFloor: intFlag('--requests-per-slot-floor', values['requests-per-slot-floor'], 1),
    sessions: intFlag('--sessions', values.sessions, 1, 1_000_000),
    turns: intFlag('--turns', values.turns, 1, 1_000),
    userTokens: intFlag('--user-tokens', values['user-tokens'], 8, MAX_TOKENS_FLAG),
    systemTokens: intFlag('--system-tokens', values['system-tokens'], 0, MAX_TOKENS_FLAG),
    assistantTokens: intFlag('--assistant-tokens', values['assistant-tokens'], 1, MAX_TOKENS_FLAG),
    thinkTimeMs: numberFlag('--think-time-ms', values['think-time-ms'], 0, 3_600_000),
    history: oneOf('--history', values.history, ['replayed', 'live'] as const),
    conversations: values.conversations,
  }
}

const SLO_KEYS: Record<string, keyof SLO> = {
  ttft: 'ttftMs',
  tpot: 'tpotMs',
  e2e: 'e2eMs',
  itl: 'itlMs',
  'itl-percentile': 'itlPercentile',
}

/**
 * `--slo ttft=500,tpot=50,e2e=20000,itl=100,itl-percentile=99` (ms) as an SLO.
 * @throws ServegateError `CONFIG_INVALID` naming the key and the fix
 */
export function sloFlag(value: string | undefined): SLO | undefined {
  if (value === undefined) return undefined
  const slo: SLO = {}
  for (const part of value.split(',')) {
    const [key = '', raw = ''] = part.split('=').map((s) => s.trim())
    const field = SLO_KEYS[key]
    const n = Number(raw)
    if (field === undefined)
      throw new ServegateError(
        'CONFIG_INVALID',
        `--slo: unknown objective "${key}"; use ${Object.keys(SLO_KEYS).join(', ')}, e.g. --slo ttft=500,tpot=50`,
      )
    if (raw === '' || !Number.isFinite(n) || n <= 0)
      throw new ServegateError('CONFIG_INVALID', `--slo: ${key}=${raw} is not valid; pass a number of ms > 0, e.g. ${key}=500`)
    slo[field] = n
  }
  if (slo.ttftMs === undefined && slo.tpotMs === undefined && slo.e2eMs === undefined && slo.itlMs === undefined) {
    throw new ServegateError('CONFIG_INVALID', '--slo: give at least one of ttft, tpot, e2e, itl (ms), e.g. --slo ttft=500,tpot=50')
  }
  return slo
}

/** Flags that shape a rate process; a trace or the closed loop takes none of them. */
export const RATE_SHAPE_FLAGS = ['arrival', 'burstiness', 'arrival-seed', 'ramp-up-s', 'ramp-up-from'] as const

/** The first of `names` that was given, as `--name`; undefined when none was. */
export function givenFlag(values: CellFlagValues, names: ReadonlyArray<keyof CellFlagValues>): string | undefined {
  const name = names.find((f) => values[f] !== undefined)
  return name === undefined ? undefined : `--${name}`
}

/** `--max-in-flight N`, or null for no cap. */
export function maxInFlightFlag(values: CellFlagValues): number | null {
  return intFlag('--max-in-flight', values['max-in-flight'], 1, 65_536) ?? null
}

/**
 * The arrival process of the flags at a rate: `--arrival` (default poisson, as vLLM's
 * benchmark; gamma when only `--burstiness` is given), seed, ramp-up and in-flight cap.
 */
export function rateArrival(
  values: CellFlagValues,
  ratePerS: number,
  fallback: 'poisson' | 'constant',
): Exclude<ArrivalSpec, { kind: 'trace' }> {
  const burstiness = numberFlag('--burstiness', values.burstiness, { above: 0 }, 1000)
  const kind =
    oneOf('--arrival', values.arrival, ['constant', 'poisson', 'gamma'] as const) ?? (burstiness === undefined ? fallback : 'gamma')
  if (burstiness !== undefined && kind !== 'gamma')
    throw new ServegateError('CONFIG_INVALID', `--burstiness: only gamma arrivals have one; pass --arrival gamma or drop --burstiness`)
  if (kind === 'gamma' && burstiness === undefined)
    throw new ServegateError(
      'CONFIG_INVALID',
      '--arrival gamma needs --burstiness B (1 is Poisson; below 1 burstier, above 1 more regular)',
    )
  const seed = intFlag('--arrival-seed', values['arrival-seed'], 0)
  const rampS = numberFlag('--ramp-up-s', values['ramp-up-s'], { above: 0 }, 86_400)
  const from = numberFlag('--ramp-up-from', values['ramp-up-from'], 0, 100_000)
  if (from !== undefined && rampS === undefined)
    throw new ServegateError('CONFIG_INVALID', '--ramp-up-from needs --ramp-up-s S (the ramp length)')
  const shared = {
    ratePerS,
    rampUp: rampS === undefined ? null : { durationS: rampS, fromRatePerS: from ?? 0 },
    maxInFlight: maxInFlightFlag(values),
  }
  if (kind === 'constant') {
    if (seed !== undefined)
      throw new ServegateError('CONFIG_INVALID', '--arrival-seed: constant arrivals draw nothing; drop it or pass --arrival poisson|gamma')
    return { kind, ...shared }
  }
  return kind === 'gamma' ? { kind, burstiness: burstiness as number, seed, ...shared } : { kind, seed, ...shared }
}

/** The cell options shared by every command that measures (everything but where and the model). */
export function cellFromFlags(values: CellFlagValues): CellPlan {
  const api = values.api ?? 'chat'
  if (api !== 'chat' && api !== 'completions')
    throw new ServegateError('CONFIG_INVALID', `--api: "${api}" is not valid; pass chat or completions`)
  let apiKey: string | undefined
  if (values['api-key-env'] !== undefined) {
    apiKey = process.env[values['api-key-env']]
    if (apiKey === undefined || apiKey === '') {
      throw new ServegateError(
        'CONFIG_INVALID',
        `--api-key-env: environment variable ${values['api-key-env']} is not set; export it or drop the flag`,
      )
    }
  }
  return {
    api,
    requests: intFlag('--requests', values.requests, 1, MAX_REQUESTS),
    warmupRequests: intFlag('--warmup', values.warmup, 0, MAX_WARMUP),
    maxTokens: lengthFlag('--max-tokens', values['max-tokens'], MIN_MAX_TOKENS),
    workload: workloadFlags(values),
    calibrate: values['no-calibrate'] !== true,
    usageCheck: {
      maxTokensPerChunk: intFlag('--max-tokens-per-chunk', values['max-tokens-per-chunk'], 1, 1_000_000),
      retokenize: values['no-retokenize'] !== true,
    },
    requestTimeoutMs: intFlag('--request-timeout-ms', values['request-timeout-ms'], 1, 86_400_000),
    cancel: cancelFlag(values.cancel),
    sendLagLimitMs: numberFlag('--send-lag-limit-ms', values['send-lag-limit-ms'], { above: 0 }, 60_000),
    eventLoopDelayLimitMs: numberFlag('--event-loop-delay-limit-ms', values['event-loop-delay-limit-ms'], { above: 0 }, 60_000),
    slo: sloFlag(values.slo) ?? null,
    clientWorkers: clientWorkersFlag(values['client-workers']),
    apiKey,
  }
}

/** Where to measure: exactly one of `--base-url` (with `--model`) and `--engine`. */
export function requireTarget(values: CellFlagValues): void {
  if (values['base-url'] !== undefined && values.engine !== undefined) {
    throw new ServegateError(
      'CONFIG_INVALID',
      '--base-url and --engine are exclusive; pass --base-url for an engine that is up, or --engine FILE to launch one',
    )
  }
  if (values['base-url'] === undefined && values.engine === undefined) {
    throw new ServegateError(
      'CONFIG_INVALID',
      '--base-url is required; pass e.g. --base-url http://127.0.0.1:8000 (or --engine FILE to launch an engine)',
    )
  }
  if (values.engine === undefined && values.model === undefined)
    throw new ServegateError('CONFIG_INVALID', '--model is required; pass the model name the server serves (see GET /v1/models)')
}

/**
 * How `--base-url` may be reached: `--remote` allows a host other than loopback, `--ca-file`
 * verifies its TLS. With `--engine` they belong in the engine file (`remote`, `caFile`).
 */
export function targetAccess(values: CellFlagValues): { remote: boolean; caFile?: string } {
  if (values.engine !== undefined) {
    const stray = values.remote === true ? '--remote' : values['ca-file'] !== undefined ? '--ca-file' : null
    if (stray !== null) {
      throw new ServegateError(
        'CONFIG_INVALID',
        `${stray} goes with --base-url; with --engine set it in the engine file (an external engine's remote: true, caFile)`,
      )
    }
  }
  return { remote: values.remote === true, ...(values['ca-file'] === undefined ? {} : { caFile: resolve(values['ca-file']) }) }
}

export async function readEngineConfig(path: string): Promise<EngineConfig> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `--engine: cannot read ${path}; pass the path of a JSON engine config`, { cause: error })
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `--engine: ${path} is not JSON (${(error as Error).message}); pass a JSON engine config`, {
      cause: error,
    })
  }
  try {
    return resolveEngineConfig(engineFileConfig(json), 'engine')
  } catch (error) {
    if (error instanceof ServegateError) throw new ServegateError(error.code, `--engine ${path}: ${error.message}`, { cause: error })
    throw error
  }
}

/** Every `kind` an `--engine` file may name: the engine configs, and `sim` (what `engine.sim()` declares in a spec). */
export const ENGINE_FILE_KINDS = [...ENGINE_KINDS, 'sim'] as const

/** The fields of a `"kind": "sim"` engine file: `engine.sim()`'s options. */
const SIM_FIELDS = ['kind', 'name', 'model', 'sim', 'startupTimeoutMs']

/**
 * An `--engine` file's config: as written, or for `"kind": "sim"` the command engine that runs
 * servegate's simulated engine, as `engine.sim()` builds it. A kind or a sim field that is not
 * one (a typo) names the one it most likely meant.
 * @throws ServegateError CONFIG_INVALID
 */
function engineFileConfig(json: unknown): unknown {
  const kind = (json as { kind?: unknown } | null)?.kind
  if (typeof kind !== 'string' || !(ENGINE_FILE_KINDS as readonly string[]).includes(kind)) {
    const meant = typeof kind === 'string' ? closest(kind, ENGINE_FILE_KINDS) : null
    throw new ServegateError(
      'CONFIG_INVALID',
      `engine.kind: ${JSON.stringify(kind ?? null)} is not an engine kind; ${meant === null ? '' : `did you mean "${meant}"? `}` +
        `use one of ${ENGINE_FILE_KINDS.join(', ')}`,
    )
  }
  if (kind !== 'sim') return json
  const stray = Object.keys(json as object).find((key) => !SIM_FIELDS.includes(key))
  if (stray !== undefined) {
    const meant = closest(stray, SIM_FIELDS)
    throw new ServegateError(
      'CONFIG_INVALID',
      `engine.${stray}: not a field of a sim engine; ${meant === null ? `use ${SIM_FIELDS.join(', ')}` : `did you mean "${meant}"?`}`,
    )
  }
  const { kind: _, ...sim } = json as SimEngineConfig & { kind: 'sim' }
  return simCommandConfig(sim)
}

/** A malformed input file, found before anything runs, as the usage error it is (exit 2), naming the flag. */
async function asUsageError<T>(flag: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (error) {
    if (error instanceof ServegateError && error.code === 'FILE_INVALID')
      throw new ServegateError('CONFIG_INVALID', `${flag}: ${error.message}`, { cause: error })
    throw error
  }
}

/**
 * Reads `--dataset` (every row, and the images it references) and `--trace` (every row) as the
 * cell will, before any engine starts or request is sent: a missing, unreadable or malformed
 * file is a usage error (CONFIG_INVALID, exit 2) naming the flag, the line and the fix, never a
 * failure after an engine spent minutes loading.
 * @returns the trace's rows, for `--trace` without `--requests` (every row is replayed); null without `--trace`
 */
export async function checkInputFiles(values: {
  dataset?: string | undefined
  trace?: string | undefined
  conversations?: string | undefined
}): Promise<number | null> {
  const { dataset, trace, conversations } = values
  if (dataset !== undefined) {
    await checkReadableFile('--dataset', dataset, 'a JSONL dataset')
    await asUsageError('--dataset', () => loadDataset(dataset))
  }
  if (conversations !== undefined) {
    await checkReadableFile('--conversations', conversations, 'a JSONL or JSON file of conversations')
    await asUsageError('--conversations', () => loadConversations(conversations))
  }
  if (trace === undefined) return null
  await checkReadableFile('--trace', trace, 'a JSONL trace')
  return (await asUsageError('--trace', () => loadTrace(trace))).rows.length
}
