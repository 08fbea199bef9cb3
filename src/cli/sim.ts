import { parseArgs } from 'node:util'
import { ServegateError } from '../errors.ts'
import { closest } from '../runner/cell-options.ts'
import { describeSimOptionsError, FAULT_KINDS, SimOptions, type ResolvedSimOptions, type SimOptionName } from '../sim/sim-options.ts'
import { startSimServer } from '../sim/server.ts'

type FlagValue = 'number' | 'string' | 'boolean' | 'list' | 'fault'

interface Flag {
  /** The flag without its dashes. */
  name: string
  option: SimOptionName
  value: FlagValue
  help: string
}

const FLAGS: readonly Flag[] = [
  { name: 'port', option: 'port', value: 'number', help: 'TCP port; 0 picks a free one (default 8000)' },
  { name: 'host', option: 'host', value: 'string', help: 'loopback host: 127.0.0.1 (default), ::1 or localhost' },
  { name: 'model', option: 'model', value: 'string', help: 'model id served (default sim-model)' },
  { name: 'prefill-tok-per-s', option: 'prefillTokPerS', value: 'number', help: 'prefill lane speed, prompt tokens/s (default 20000)' },
  { name: 'decode-tok-per-s', option: 'decodeTokPerS', value: 'number', help: 'decode speed of one stream alone, tokens/s (default 50)' },
  { name: 'batch-slowdown', option: 'batchSlowdown', value: 'number', help: 'step slowdown per extra stream in the batch (default 0.1)' },
  {
    name: 'max-batch',
    option: 'maxBatch',
    value: 'number',
    help: 'requests admitted at once; more wait in a FIFO queue (default: no limit)',
  },
  {
    name: 'kv-budget-tokens',
    option: 'kvBudgetTokens',
    value: 'number',
    help: 'KV tokens; each request reserves prompt + output (default: no limit)',
  },
  { name: 'tokens-per-chunk', option: 'tokensPerChunk', value: 'number', help: 'tokens per streamed chunk (default 1)' },
  {
    name: 'reasoning-tokens',
    option: 'reasoningTokens',
    value: 'number',
    help: 'leading tokens sent as reasoning_content, chat only (default 0)',
  },
  { name: 'output-tokens', option: 'outputTokens', value: 'number', help: 'natural output length, tokens (default: until max_tokens)' },
  { name: 'max-model-len', option: 'maxModelLen', value: 'number', help: 'context window, tokens (default 32768)' },
  {
    name: 'fault',
    option: 'faults',
    value: 'fault',
    help: `KIND:IDX[,IDX...] inject KIND at those request indices; repeatable. KIND: ${FAULT_KINDS.join(', ')}`,
  },
  { name: 'fault-rate', option: 'faultRate', value: 'number', help: 'probability 0..1 that a request gets a fault (default 0)' },
  {
    name: 'fault-kinds',
    option: 'faultKinds',
    value: 'list',
    help: 'kinds used round-robin by --fault-rate, comma-separated (default all)',
  },
  { name: 'seed', option: 'seed', value: 'number', help: 'seed of fault draws and output words (default 0)' },
  {
    name: 'launch-noise',
    option: 'launchNoise',
    value: 'number',
    help: "relative sd of a launch's speed: one draw scales prefill and decode for the launch's life (default 0)",
  },
  { name: 'launch-seed', option: 'launchSeed', value: 'number', help: 'seed of the launch draw (default: random each launch)' },
  { name: 'keepalive-ms', option: 'keepaliveMs', value: 'number', help: 'send ": keep-alive" after this many ms of silence (default off)' },
  { name: 'crlf', option: 'crlf', value: 'boolean', help: 'end SSE lines with \\r\\n' },
  {
    name: 'no-tokenize',
    option: 'noTokenize',
    value: 'boolean',
    help: 'answer POST /tokenize with 404 (an engine without a tokenizer endpoint)',
  },
  {
    name: 'ignore-output-knobs',
    option: 'ignoreOutputKnobs',
    value: 'boolean',
    help: 'ignore ignore_eos and min_tokens (an engine that drops unknown fields)',
  },
  {
    name: 'dialect',
    option: 'dialect',
    value: 'string',
    help: 'Prometheus names and version endpoint of vllm (default), sglang, llama-server or trtllm',
  },
  { name: 'version', option: 'version', value: 'string', help: 'version the version endpoint reports (default servegate-sim)' },
  {
    name: 'prefix-cache-tokens',
    option: 'prefixCacheTokens',
    value: 'number',
    help: 'prefix cache capacity, tokens: an LRU over blocks, prefill pays only uncached tokens (default 0: off)',
  },
  { name: 'prefix-block-tokens', option: 'prefixBlockTokens', value: 'number', help: 'tokens per prefix-cache block (default 16)' },
  {
    name: 'leak-kv-on-abort',
    option: 'leakKvOnAbort',
    value: 'boolean',
    help: 'never free an aborted request: it keeps its KV and counts as running (an engine that leaks on abort)',
  },
]

const HELP = [
  'Usage: servegate sim [flags]',
  '',
  'Runs a simulated OpenAI-compatible streaming engine on loopback (no GPU needed).',
  'Prints "servegate sim listening on URL (model NAME)" once ready; stops on SIGINT or SIGTERM.',
  '',
  ...FLAGS.map((flag) => `  --${flag.name}${flag.value === 'boolean' ? '' : ' VALUE'}`.padEnd(28) + flag.help),
  '  --options JSON'.padEnd(28) + 'sim options as one JSON object (camelCase names); the flags above override it',
  '  --help'.padEnd(28) + 'print this help',
  '',
].join('\n')

/** The CLI's default port, as vLLM's; the library default is 0 (a free port). */
const DEFAULT_PORT = 8000

/**
 * `servegate sim`: serves the simulated engine until `signal` aborts or the process gets SIGINT
 * or SIGTERM, then closes it.
 * @returns the exit code: 0 after a clean stop or `--help`
 * @throws ServegateError `CONFIG_INVALID` for a bad flag or value, one line naming the flag and the fix
 * @example await simCommand(['--port', '0', '--decode-tok-per-s', '100'], { stdout: process.stdout, stderr: process.stderr })
 */
export async function simCommand(
  argv: string[],
  io: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream },
  signal?: AbortSignal,
): Promise<number> {
  const options = parseSimArgs(argv)
  if (options === 'help') {
    io.stdout.write(HELP)
    return 0
  }
  const sim = await startSimServer(options)
  // The launch's draw is part of the line, so whoever started the sim can see what it drew.
  const speed = options.launchNoise > 0 ? `, launch speed ×${sim.launchSpeed.toFixed(4)}` : ''
  io.stdout.write(`servegate sim listening on ${sim.url} (model ${options.model}${speed})\n`)
  await stopRequested(signal)
  await sim.close()
  const { requests, faultsInjected } = sim.stats()
  const faults = Object.entries(faultsInjected).filter(([, count]) => count > 0)
  const faultText = faults.length > 0 ? `, faults ${faults.map(([kind, count]) => `${kind}=${count}`).join(' ')}` : ''
  io.stderr.write(`servegate sim stopped after ${requests} requests${faultText}\n`)
  return 0
}

/**
 * Parses the flags into validated sim options, or `'help'`.
 * @throws ServegateError `CONFIG_INVALID` naming the flag and the fix
 */
export function parseSimArgs(argv: string[]): ResolvedSimOptions | 'help' {
  const values = readFlags(argv)
  if (values.help === true) return 'help'
  const json = optionsJson(values.options)
  const input: Record<string, unknown> = { port: DEFAULT_PORT, ...json }
  // What the user typed, shaped like `input`, so an error quotes "abc" rather than NaN.
  const typed: Record<string, unknown> = { port: DEFAULT_PORT, ...json }
  for (const flag of FLAGS) {
    const raw = values[flag.name]
    if (raw === undefined) continue
    input[flag.option] = convert(flag, raw, Number)
    typed[flag.option] = convert(flag, raw, (text) => text)
  }
  const parsed = SimOptions.safeParse(input)
  if (!parsed.success) {
    const flagOf = (option: SimOptionName) => `--${FLAGS.find((flag) => flag.option === option)?.name ?? option}`
    throw new ServegateError('CONFIG_INVALID', describeSimOptionsError(parsed.error, typed, flagOf))
  }
  return parsed.data
}

/** `--options JSON`: SimOptions as one JSON object (what `engine.sim()` passes); flags override it. */
function optionsJson(raw: FlagValues[string]): Record<string, unknown> {
  if (raw === undefined) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(String(raw))
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      '--options: not JSON; pass one JSON object of sim options, e.g. --options \'{"decodeTokPerS":100}\'',
      { cause: error },
    )
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ServegateError('CONFIG_INVALID', '--options: must be a JSON object of sim options, e.g. {"decodeTokPerS":100}')
  }
  return parsed as Record<string, unknown>
}

type FlagValues = Record<string, string | boolean | Array<string | boolean> | undefined>

function readFlags(argv: string[]): FlagValues {
  const options = Object.fromEntries([
    ...FLAGS.map((flag) => [
      flag.name,
      { type: flag.value === 'boolean' ? ('boolean' as const) : ('string' as const), multiple: flag.value === 'fault' },
    ]),
    ['options', { type: 'string' as const }],
    ['help', { type: 'boolean' as const }],
  ])
  try {
    return parseArgs({ args: joinNegativeValues(argv), options, strict: true, allowPositionals: false }).values
  } catch (error) {
    throw argsError(error)
  }
}

/** `--seed -5` → `--seed=-5`: parseArgs refuses a value that starts with a dash as ambiguous. */
function joinNegativeValues(argv: string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ''
    const next = argv[i + 1]
    const flag = FLAGS.find((f) => `--${f.name}` === arg)
    if (flag && flag.value === 'number' && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${arg}=${next}`)
      i++
    } else {
      out.push(arg)
    }
  }
  return out
}

function argsError(error: unknown): ServegateError {
  const message = error instanceof Error ? error.message : String(error)
  const code = (error as { code?: string }).code
  const quoted = /'([^' ]+)/.exec(message)?.[1] ?? 'servegate sim'
  const help = 'run `servegate sim --help` for the flags'
  const what =
    code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
      ? 'unknown flag'
      : code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL'
        ? 'unexpected argument; sim takes only flags'
        : /does not take/.test(message)
          ? 'takes no value'
          : 'needs a value'
  const meant =
    what === 'unknown flag' && quoted.startsWith('--')
      ? closest(
          quoted.slice(2),
          FLAGS.map((f) => f.name),
        )
      : null
  const fix =
    what === 'needs a value' ? `pass it as ${quoted} VALUE or ${quoted}=VALUE` : meant === null ? help : `did you mean --${meant}? ${help}`
  return new ServegateError('CONFIG_INVALID', `${quoted}: ${what}; ${fix}`, { cause: error })
}

function convert(flag: Flag, raw: string | boolean | Array<string | boolean>, toNumber: (text: string) => unknown): unknown {
  if (typeof raw === 'boolean') return raw
  if (Array.isArray(raw)) return raw.map((spec) => parseFault(flag, String(spec), toNumber))
  if (flag.value === 'number') return raw.trim() === '' ? Number.NaN : toNumber(raw)
  if (flag.value === 'list') return raw.split(',').map((item) => item.trim())
  return raw
}

function parseFault(flag: Flag, spec: string, toNumber: (text: string) => unknown): { kind: string; requests: unknown[] } {
  const colon = spec.indexOf(':')
  if (colon < 0) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `--${flag.name}: "${spec}" has no request indices; pass KIND:IDX[,IDX...], e.g. --${flag.name} ${spec}:0,3`,
    )
  }
  const indices = spec.slice(colon + 1).split(',')
  return {
    kind: spec.slice(0, colon),
    requests: indices.map((index) => (index.trim() === '' ? Number.NaN : toNumber(index))),
  }
}

function stopRequested(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      signal?.removeEventListener('abort', stop)
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      resolve()
    }
    if (signal?.aborted) return stop()
    signal?.addEventListener('abort', stop, { once: true })
    process.once('SIGINT', stop)
    process.once('SIGTERM', stop)
  })
}
