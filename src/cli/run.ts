import { resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { writeJsonAtomic } from '../record/io.ts'
import { runCell } from '../runner/cell.ts'
import { intFlag, parseFlags } from './flags.ts'
import type { CliIo } from './io.ts'
import { progressLine } from './progress.ts'
import { renderSummary } from './summary.ts'

export const RUN_HELP = `servegate run — measure one closed-loop cell against an OpenAI-compatible streaming endpoint

  --base-url URL            server root or /v1 prefix on loopback (required)
  --model NAME              model name sent in each request (required)
  --api chat|completions    default chat
  --concurrency C           requests in flight at once, default 1
  --requests N              measured requests, default 32
  --warmup N                warm-up requests, not recorded, default 0
  --max-tokens T            max_tokens of each request, default 128
  --prompt-tokens P         planned prompt size in tokens, default 256
  --seed S                  prompt seed, default 0
  --request-timeout-ms MS   per-request deadline, default 120000
  --api-key-env NAME        read the API key from this environment variable (never recorded)
  --out FILE                run record path, default servegate-runs/<run id>.json
  --json                    print the run record's metrics as JSON instead of the table`

const FLAGS = {
  'base-url': { type: 'string' },
  model: { type: 'string' },
  api: { type: 'string' },
  concurrency: { type: 'string' },
  requests: { type: 'string' },
  warmup: { type: 'string' },
  'max-tokens': { type: 'string' },
  'prompt-tokens': { type: 'string' },
  seed: { type: 'string' },
  'request-timeout-ms': { type: 'string' },
  'api-key-env': { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

/** `servegate run`: runs a cell, shows progress on a TTY, prints the summary, writes the record. */
export async function runCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('run', argv, FLAGS)
  if (values.help === true) {
    io.stdout.write(`${RUN_HELP}\n`)
    return 0
  }
  if (values['base-url'] === undefined) throw new ServegateError('CONFIG_INVALID', '--base-url is required; pass e.g. --base-url http://127.0.0.1:8000')
  if (values.model === undefined) throw new ServegateError('CONFIG_INVALID', '--model is required; pass the model name the server serves (see GET /v1/models)')
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
  const record = await runCell(
    {
      baseUrl: values['base-url'],
      model: values.model,
      api,
      concurrency: intFlag('--concurrency', values.concurrency, 1, 4096),
      requests: intFlag('--requests', values.requests, 1),
      warmupRequests: intFlag('--warmup', values.warmup, 0),
      maxTokens: intFlag('--max-tokens', values['max-tokens'], 1),
      promptTokens: intFlag('--prompt-tokens', values['prompt-tokens'], 8),
      seed: intFlag('--seed', values.seed, 0),
      requestTimeoutMs: intFlag('--request-timeout-ms', values['request-timeout-ms'], 1),
      apiKey,
    },
    { onProgress: progress.update, signal },
  ).finally(progress.done)

  const out = resolve(values.out ?? `servegate-runs/${record.runId}.json`)
  await writeJsonAtomic(out, record)
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify({ metrics: record.metrics, completed: record.completed, failed: record.failed, failures: record.failures, harness: record.harness, record: out }, null, 2)}\n`)
  } else {
    io.stdout.write(`${renderSummary(record, out)}\n`)
  }
  return 0
}
