import { resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { writeJsonAtomic } from '../record/io.ts'
import { readFile } from 'node:fs/promises'
import { type EngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { runCell } from '../runner/cell.ts'
import { type EngineCellOptions, runEngineCell } from '../runner/engine-cell.ts'
import { nvidiaSmiGpuFacts } from '../runner/gpu-facts.ts'
import { WORKLOAD_KINDS, type WorkloadSpec } from '../workload/spec.ts'
import { intFlag, parseFlags } from './flags.ts'
import type { CliIo } from './io.ts'
import { progressLine } from './progress.ts'
import { renderSummary } from './summary.ts'

export const RUN_HELP = `servegate run — measure one closed-loop cell against an OpenAI-compatible streaming endpoint

  --base-url URL            server root or /v1 prefix on loopback (or --engine)
  --engine FILE             JSON engine config to launch and tear down: {"kind": "vllm" | "sglang" |
                            "llama-server" | "trtllm" | "command" | "external" | "node-llama-cpp", "model": {"id": …}, …}
  --model NAME              model name sent in each request (required with --base-url)
  --api chat|completions    default chat
  --concurrency C           requests in flight at once, default 1
  --requests N              measured requests, default 32
  --warmup N                warm-up requests, not recorded, default 0
  --max-tokens T            max_tokens of each request, default 128
  --workload KIND           synthetic-summary (default), synthetic-repeated-code, shared-prefix, dataset
  --dataset FILE            JSONL of prompts with reference answers (implies --workload dataset)
  --prompt-tokens P         planned prompt size in tokens (engine-counted), default 256
  --seed S                  workload seed, default 0
  --prefix-cache MODE       unique (default: a per-request prefix defeats prefix caching) or shared:N
  --canaries                ask each reply to start with its own marker; a missing or foreign marker is contract-invalid
  --output-control MODE     none (default), observe (record exact-length adherence) or strict (non-exact is contract-invalid)
  --output-knob KNOB        ignore_eos (default) or min_tokens
  --temperature T           sampling temperature (unset: the engine's default)
  --top-p P                 nucleus sampling
  --sampling-seed N         sampling seed sent to the engine
  --reasoning-effort E      low, medium or high (chat only)
  --thinking on|off         chat_template_kwargs.enable_thinking (chat only)
  --no-calibrate            do not size prompts with the engine's /tokenize; estimate
  --requests-per-slot-floor K  flag the cell when requests < K × concurrency, default 4
  --request-timeout-ms MS   per-request deadline, default 120000
  --api-key-env NAME        read the API key from this environment variable (never recorded)
  --out FILE                run record path, default servegate-runs/<run id>.json
  --json                    print the run record's metrics as JSON instead of the table`

const FLAGS = {
  'base-url': { type: 'string' },
  engine: { type: 'string' },
  model: { type: 'string' },
  api: { type: 'string' },
  concurrency: { type: 'string' },
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
  'requests-per-slot-floor': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
  'api-key-env': { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

type RunFlags = ReturnType<typeof parseFlags<typeof FLAGS>>['values']

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined
  if ((allowed as readonly string[]).includes(value)) return value as T
  throw new ServegateError('CONFIG_INVALID', `${flag}: "${value}" is not valid; pass one of ${allowed.join(', ')}`)
}

function numberFlag(flag: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
    throw new ServegateError('CONFIG_INVALID', `${flag}: "${value}" is not valid; pass a number from ${min} to ${max}`)
  }
  return n
}

function prefixCacheFlag(value: string | undefined): WorkloadSpec['prefixCache'] {
  if (value === undefined || value === 'unique') return undefined
  const shared = /^shared:(\d+)$/.exec(value)
  if (shared === null) throw new ServegateError('CONFIG_INVALID', `--prefix-cache: "${value}" is not valid; pass unique or shared:N (N shared prefix tokens)`)
  return { mode: 'shared', tokens: intFlag('--prefix-cache shared:N', shared[1], 1) as number }
}

/** The workload part of `servegate run`'s flags. */
function workloadFlags(values: RunFlags): WorkloadSpec {
  const thinking = oneOf('--thinking', values.thinking, ['on', 'off'])
  return {
    kind: oneOf('--workload', values.workload, WORKLOAD_KINDS) ?? (values.dataset === undefined ? undefined : 'dataset'),
    datasetPath: values.dataset,
    promptTokens: intFlag('--prompt-tokens', values['prompt-tokens'], 8),
    seed: intFlag('--seed', values.seed, 0),
    prefixCache: prefixCacheFlag(values['prefix-cache']),
    canaries: values.canaries === true,
    outputControl: {
      mode: oneOf('--output-control', values['output-control'], ['none', 'observe', 'strict'] as const),
      knob: oneOf('--output-knob', values['output-knob'], ['ignore_eos', 'min_tokens'] as const),
    },
    sampling: {
      temperature: numberFlag('--temperature', values.temperature, 0, 2),
      topP: numberFlag('--top-p', values['top-p'], Number.MIN_VALUE, 1),
      seed: intFlag('--sampling-seed', values['sampling-seed'], 0),
      reasoningEffort: oneOf('--reasoning-effort', values['reasoning-effort'], ['low', 'medium', 'high'] as const),
      thinking: thinking === undefined ? undefined : thinking === 'on' ? 'enabled' : 'disabled',
    },
    requestsPerSlotFloor: intFlag('--requests-per-slot-floor', values['requests-per-slot-floor'], 1),
  }
}

async function readEngineConfig(path: string): Promise<EngineConfig> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch {
    throw new ServegateError('CONFIG_INVALID', `--engine: cannot read ${path}; pass the path of a JSON engine config`)
  }
  try {
    return resolveEngineConfig(JSON.parse(text) as unknown, 'engine')
  } catch (error) {
    if (error instanceof ServegateError) throw new ServegateError(error.code, `--engine ${path}: ${error.message}`)
    throw new ServegateError('CONFIG_INVALID', `--engine: ${path} is not JSON (${(error as Error).message}); pass a JSON engine config`)
  }
}

/** `servegate run`: runs a cell, shows progress on a TTY, prints the summary, writes the record. */
export async function runCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('run', argv, FLAGS)
  if (values.help === true) {
    io.stdout.write(`${RUN_HELP}\n`)
    return 0
  }
  if (values['base-url'] !== undefined && values.engine !== undefined) {
    throw new ServegateError('CONFIG_INVALID', '--base-url and --engine are exclusive; pass --base-url for an engine that is up, or --engine FILE to launch one')
  }
  if (values['base-url'] === undefined && values.engine === undefined) {
    throw new ServegateError('CONFIG_INVALID', '--base-url is required; pass e.g. --base-url http://127.0.0.1:8000 (or --engine FILE to launch an engine)')
  }
  if (values.engine === undefined && values.model === undefined) throw new ServegateError('CONFIG_INVALID', '--model is required; pass the model name the server serves (see GET /v1/models)')
  const api = values.api ?? 'chat'
  if (api !== 'chat' && api !== 'completions') throw new ServegateError('CONFIG_INVALID', `--api: "${api}" is not valid; pass chat or completions`)
  let apiKey: string | undefined
  if (values['api-key-env'] !== undefined) {
    apiKey = process.env[values['api-key-env']]
    if (apiKey === undefined || apiKey === '') {
      throw new ServegateError('CONFIG_INVALID', `--api-key-env: environment variable ${values['api-key-env']} is not set; export it or drop the flag`)
    }
  }

  const progress = progressLine(io)
  const cell = {
    api,
    concurrency: intFlag('--concurrency', values.concurrency, 1, 4096),
    requests: intFlag('--requests', values.requests, 1),
    warmupRequests: intFlag('--warmup', values.warmup, 0),
    maxTokens: intFlag('--max-tokens', values['max-tokens'], 1),
    workload: workloadFlags(values),
    calibrate: values['no-calibrate'] !== true,
    requestTimeoutMs: intFlag('--request-timeout-ms', values['request-timeout-ms'], 1),
    apiKey,
  } satisfies EngineCellOptions
  const hooks = { onProgress: progress.update, signal }
  const record = await (values.engine === undefined
    ? runCell({ ...cell, baseUrl: values['base-url'] as string, model: values.model as string }, hooks)
    : runEngineCell(await readEngineConfig(values.engine), cell, { ...hooks, gpuFacts: nvidiaSmiGpuFacts() })
  ).finally(progress.done)

  const out = resolve(values.out ?? `servegate-runs/${record.runId}.json`)
  await writeJsonAtomic(out, record)
  if (record.cellFailure !== null) {
    io.stdout.write(`${renderSummary(record, out)}\n`)
    io.stderr.write(`servegate: the cell failed: ${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}\n`)
    return 1
  }
  if (signal?.aborted === true) {
    io.stdout.write(`${renderSummary(record, out)}\n`)
    io.stderr.write('servegate: interrupted; the requests measured so far are in the record, the cancelled ones failed as REQUEST_ABORTED\n')
    return 130
  }
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify({ metrics: record.metrics, completed: record.completed, failed: record.failed, failures: record.failures, harness: record.harness, record: out }, null, 2)}\n`)
  } else {
    io.stdout.write(`${renderSummary(record, out)}\n`)
  }
  return 0
}
