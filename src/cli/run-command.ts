import { resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { parseBaseUrl, trustCaFile } from '../loopback.ts'
import { MAX_BLOCK_TOKENS, MAX_RATE_PER_S } from '../load/arrival-spec.ts'
import { RequestSpill, writeSpilledRecord } from '../record/request-spill.ts'
import type { ErrorInfo, RunRecord } from '../schema/run.ts'
import { type CellPlan, resolveCellPlan } from '../runner/cell-options.ts'
import { readDeclaredFiles } from '../runner/declared-files.ts'
import { runEngineCell } from '../runner/runner.ts'
import { readEngineFiles } from '../engines/adapters.ts'
import { checkGpuMetricsUrl, type EngineConfig, resolveEngineConfig } from '../engines/config.ts'
import {
  ARRIVAL_FLAGS,
  LOAD_FLAGS,
  cellFromFlags,
  checkInputFiles,
  environmentFromFlags,
  givenFlag,
  maxInFlightFlag,
  numberFlag,
  RATE_SHAPE_FLAGS,
  rateArrival,
  readEngineConfig,
  requireTarget,
  TARGET_FLAGS,
  targetAccess,
  WORKLOAD_FLAGS,
} from './cell-flags.ts'
import { intFlag, parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'
import { checkCellFits, contextLimit } from '../runner/context-limit.ts'
import { interruption } from './interrupt.ts'
import { checkWritableFile } from './path-flags.ts'
import { progressLine } from './progress-line.ts'
import { renderSummary } from './summary.ts'
import { launchShards, printMergedRecord, SHARD_FLAGS, SHARD_HELP, ShardSession, shardRole } from './shards-command.ts'

const RUN_HELP =
  'servegate run — measure one cell (closed loop at a concurrency, or open loop at a rate or on a trace) ' +
  'against an OpenAI-compatible streaming endpoint' +
  `

  --base-url URL            server root or /v1 prefix on loopback (or --engine)
  --remote                  allow a --base-url on another host (a gateway, a Service); without it only loopback
                            is measured and a remote host is refused before anything is sent; redirects are refused;
                            its round trips are probed apart (TCP handshake, HTTP) and TTFT/e2e shown network-adjusted
  --ca-file FILE            PEM CA that an https:// --base-url's certificate is verified against
                            (default: Node's and the system's CAs)
  --gpu-metrics-url URL     the deployment's DCGM exporter (http://HOST:9400/metrics): the manifest's GPU facts come
                            from it, not from nvidia-smi here; on another host only with --remote
  --engine FILE             JSON engine config to launch and tear down: {"kind": "vllm" | "sglang" | "llama-server" |
                            "trtllm" | "command" | "external" | "node-llama-cpp" | "kubernetes" | "sim",
                            "model": {"id": …}, …}
                            (docs/engines.md); "sim" takes engine.sim()'s fields: {"kind": "sim", "sim": {"decodeTokPerS": 120}}
  --model NAME              model name sent in each request (required with --base-url)
  --api chat|completions    default chat
  --concurrency C           closed loop: requests in flight at once, default 1
  --rate R                  open loop: send R requests/s on a schedule drawn before the cell, whatever the engine does
  --arrival KIND            with --rate: poisson (default), constant or gamma
  --burstiness B            gamma arrivals' shape: 1 is Poisson, below 1 burstier, above 1 more regular (implies gamma)
  --arrival-seed S          seed of the Poisson or gamma draws, default 0
  --ramp-up-s S             ramp the rate up linearly over the first S seconds (from --ramp-up-from R, default 0)
  --max-in-flight N         open loop: cap on requests in flight (a request due at the cap waits; counted)
  --trace FILE              open loop: replay a JSONL trace of {"timestamp" ms, "input_length", "output_length"} rows
                            (Mooncake's shape); its first --requests rows, every row by default
  --trace-time-scale X      multiply the trace's offsets by X (0.5 replays twice as fast), default 1
  --trace-block-tokens N    tokens per block of the trace's "hash_ids": rows sharing an id share that block's bytes
                            (sized with the engine's tokenizer), default 512 (Mooncake's)
  --slo OBJECTIVES          ttft=MS,tpot=MS,e2e=MS,itl=MS[,itl-percentile=P]: the record gets the cell's goodput
  --requests N              measured requests, default 32
  --warmup N                warm-up requests, not recorded, default 0
  --max-tokens T            max_tokens of each request, default 128
  --workload KIND           synthetic-summary (default), synthetic-repeated-code, shared-prefix, dataset, conversation
  --sessions N --turns K    conversation: N sessions of K turns (its requests are N × K)
  --user-tokens U           conversation: tokens of each user turn
  --system-tokens S         conversation: a system prompt every session shares, default 0
  --assistant-tokens A      conversation: tokens of each replayed assistant turn, default --max-tokens
  --think-time-ms MS        conversation: wait after a turn before the session's next, default 0
  --history MODE            conversation: replayed (default: both arms the same bytes) or live (the model's replies)
  --conversations FILE      conversation: turns from OpenAI messages JSONL or ShareGPT instead of generated ones
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
  --max-tokens-per-chunk N  usage.completion_tokens may be at most N per streamed chunk (default 16)
  --no-retokenize           do not count the streamed text with the engine's /tokenize to check usage
  --requests-per-slot-floor K  flag the cell when requests < K × concurrency, default 4
  --request-timeout-ms MS   per-request deadline, default 120000
  --cancel SHARE@MS         abort a seeded share of the requests MS after each is sent (recorded as cancelled);
                            the engine must then go back to idle, or the cell fails
  --send-lag-limit-ms MS    flag the cell harness-limited when its send lag p99 exceeds this, default 5
  --event-loop-delay-limit-ms MS  … or its event-loop delay p99 exceeds this, default 10
  --client-workers auto|N   worker threads the client streams on (0: the cell's own thread), default auto:
                            one per 32 streams where more than one core is free beyond the engine's
  --api-key-env NAME        read the API key from this environment variable (never recorded)
  --nvidia-smi PATH         nvidia-smi for the manifest's GPU facts and the GPU sampler, default nvidia-smi on PATH
  --out FILE                run record path, default servegate-runs/<run id>.json (checked before the cell;
                            an existing file is replaced)
  --json                    print the run record's metrics as JSON instead of the table

exit codes: 0 measured; 1 the cell failed (engine exited, did not start, cannot serve it); 2 bad flags or
paths, before anything runs; 3 the cell ran but every request failed (e.g. all 401); 130 Ctrl-C, 143 SIGTERM,
129 SIGHUP (the partial record is written in every case but 2)
${SHARD_HELP}`

const FLAGS = {
  ...TARGET_FLAGS,
  ...WORKLOAD_FLAGS,
  ...LOAD_FLAGS,
  ...ARRIVAL_FLAGS,
  'gpu-metrics-url': { type: 'string' },
  ...SHARD_FLAGS,
  out: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

type RunFlags = ReturnType<typeof parseFlags<typeof FLAGS>>['values']

/** Closed loop at `--concurrency`, or open loop at `--rate` or on `--trace`; the arrival flags need one of the latter. */
export function loadFlags(values: Partial<RunFlags>): Pick<CellPlan, 'concurrency' | 'arrival'> {
  const concurrency = intFlag('--concurrency', values.concurrency, 1, 4096)
  const rate = numberFlag('--rate', values.rate, { above: 0 }, MAX_RATE_PER_S)
  const open = [rate !== undefined && '--rate', values.trace !== undefined && '--trace'].filter((f): f is string => f !== false)
  if (open.length > 1) throw new ServegateError('CONFIG_INVALID', '--rate and --trace are exclusive; a trace sets its own arrival times')
  if (open.length > 0 && concurrency !== undefined) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${open[0]} and --concurrency are exclusive (open loop vs closed loop); to cap the requests in flight pass --max-in-flight N`,
    )
  }
  if (values.trace !== undefined) {
    const stray = givenFlag(values, RATE_SHAPE_FLAGS)
    if (stray !== undefined)
      throw new ServegateError(
        'CONFIG_INVALID',
        `${stray}: a trace sets its own arrival times; drop it, or pass --rate R instead of --trace`,
      )
    const timeScale = numberFlag('--trace-time-scale', values['trace-time-scale'], { above: 0 }, 1000)
    const blockTokens = intFlag('--trace-block-tokens', values['trace-block-tokens'], 1, MAX_BLOCK_TOKENS)
    return { arrival: { kind: 'trace', path: values.trace, timeScale, blockTokens, maxInFlight: maxInFlightFlag(values) } }
  }
  for (const flag of ['trace-time-scale', 'trace-block-tokens'] as const) {
    if (values[flag] !== undefined) throw new ServegateError('CONFIG_INVALID', `--${flag} needs --trace FILE`)
  }
  if (rate !== undefined) return { arrival: rateArrival(values, rate, 'poisson') }
  const stray = givenFlag(values, [...RATE_SHAPE_FLAGS, 'max-in-flight'])
  if (stray !== undefined)
    throw new ServegateError('CONFIG_INVALID', `${stray} shapes open-loop arrivals; pass --rate R (requests/s) with it`)
  return { concurrency }
}

/**
 * `--gpu-metrics-url`: the DCGM exporter of a `--base-url` endpoint's GPUs, on another host only
 * with `--remote`; with `--engine` it belongs in the engine file (`gpuMetricsUrl`).
 */
function gpuMetricsUrlFlag(values: Partial<RunFlags>, remote: boolean): string | undefined {
  const url = values['gpu-metrics-url']
  if (url === undefined) return undefined
  if (values.engine !== undefined)
    throw new ServegateError('CONFIG_INVALID', '--gpu-metrics-url goes with --base-url; with --engine set gpuMetricsUrl in the engine file')
  checkGpuMetricsUrl(url, remote, '--gpu-metrics-url')
  return url
}

/** The exit code of a cell that ran but whose every request failed (a wrong key, a wrong route): nothing was measured. */
const EXIT_NOTHING_MEASURED = 3

/**
 * Fails before the cell when its sizes cannot fit the served model's context (where the server
 * reports it): the engine would refuse every request.
 */
async function checkSizesFit(baseUrl: string, model: string, cell: CellPlan, access: ReturnType<typeof targetAccess>): Promise<void> {
  // A remote host without --remote is refused here, before this first request.
  const { origin } = parseBaseUrl(baseUrl, access.remote)
  trustCaFile(origin, access.caFile, '--ca-file')
  const limit = await contextLimit(origin, model)
  if (limit !== null) checkCellFits(limit, resolveCellPlan(cell))
}

/**
 * Everything else the cell and the engine will read, read now as a spec's declaration reads it: a
 * trace shorter than `--requests`, conversations shorter than `--turns`, dataset images over
 * completions, trtllm-serve's own options file in the engine's `extraArgs`. Each is a usage
 * error (exit 2) found before any engine starts.
 */
export function checkDeclaredFiles(cell: CellPlan, engine: EngineConfig | null, enginePath: string | undefined): void {
  try {
    readDeclaredFiles(resolveCellPlan(cell), 'cell')
    if (engine !== null) readEngineFiles(resolveEngineConfig(engine), `--engine ${enginePath ?? ''}: engine`)
  } catch (error) {
    if (error instanceof ServegateError && error.code === 'FILE_INVALID')
      throw new ServegateError('CONFIG_INVALID', error.message, { cause: error })
    throw error
  }
}

/** Where a cell's requests wait on disk until its record is written: beside `--out`. */
function spillPath(out: string | undefined): string {
  return resolve(out === undefined ? `servegate-runs/in-progress-${process.pid}.requests.jsonl` : `${out}.requests.jsonl`)
}

/** The first failed request's error, read back from the spill (before it is removed). */
async function firstFailure(spill: RequestSpill): Promise<ErrorInfo | null> {
  for await (const r of spill.inOrder()) if (r.status === 'failed') return r.error
  return null
}

/** `servegate run`: runs a cell, shows progress on a TTY, prints the summary, writes the record. */
export async function runCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('run', argv, FLAGS)
  if (values.help === true) {
    io.stdout.write(`${RUN_HELP}\n`)
    return 0
  }
  requireTarget(values)
  const sharding = shardRole(values)
  const access = targetAccess(values)
  const gpuMetricsUrl = gpuMetricsUrlFlag(values, access.remote)
  const cell: CellPlan = { ...cellFromFlags(values), ...loadFlags(values) }
  // Every path is checked before the cell: a bad --out found after it would lose the measurement.
  await checkWritableFile(values.out === undefined ? '--out (default servegate-runs/)' : '--out', values.out ?? 'servegate-runs/x.json')
  const rows = await checkInputFiles(values)
  // A trace without --requests replays every row.
  if (rows !== null && cell.requests === undefined) cell.requests = rows
  const engine = values.engine === undefined ? null : await readEngineConfig(values.engine)
  checkDeclaredFiles(cell, engine, values.engine)
  if (engine === null) await checkSizesFit(values['base-url'] as string, values.model as string, cell, access)
  if (sharding !== null && sharding.kind !== 'member') return launchShards(sharding, values, io, signal)
  const member = sharding === null ? null : await ShardSession.open(sharding, signal)
  const env = environmentFromFlags(values)
  // Each finished request goes to disk as it ends, so a long cell's memory stays flat and a cell
  // killed outright leaves every request it finished in the spill.
  const spill = await RequestSpill.create(spillPath(values.out))
  const hooks = {
    onPhase: progressLine(io, engine === null ? (values.model as string) : `${engine.kind}:${engine.model.id}`),
    signal,
    spill,
    ...(member === null ? {} : { shard: member.cellShard() }),
  }
  // An endpoint that is already up is an external engine: it gets a manifest from what it reports
  // (version, models, GPU facts of this host), so two such runs can be compared as a pair.
  const target = engine ?? {
    kind: 'external' as const,
    baseUrl: values['base-url'] as string,
    model: { id: values.model as string },
    ...access,
    ...(gpuMetricsUrl === undefined ? {} : { gpuMetricsUrl }),
  }
  let record: RunRecord
  try {
    record = await runEngineCell(env, target, cell, hooks)
  } catch (err) {
    // Nothing was measured (a bad config, an unreachable endpoint): no spill is worth keeping.
    if (spill.count === 0) await spill.remove()
    else await spill.close()
    await member?.close(err)
    throw err
  }
  if (member !== null) record = member.withFigures(record)

  const out = resolve(values.out ?? `servegate-runs/${record.runId}.json`)
  await writeSpilledRecord(out, record, spill)
  // Read before the spill goes: the one failure a cell that measured nothing is explained by.
  const first = record.completed === 0 && record.failed !== null && record.failed > 0 ? await firstFailure(spill) : null
  await spill.remove()
  // Kubernetes pod 0 coordinates: the merged record, written and printed for the launcher to fetch.
  const merged = member === null ? null : await member.hand(record, out)
  if (merged !== null) await printMergedRecord(merged, out, io)
  // A signal wins over the failure it caused (an engine start-up cut short is not a crash).
  if (signal?.aborted === true) {
    const stop = interruption(signal)
    io.stdout.write(`${renderSummary(record, out)}\n`)
    io.stderr.write(
      record.cellFailure !== null
        ? `servegate: ${stop.message} before the cell ran (${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}); the record says so\n`
        : `servegate: ${stop.message}; the requests measured so far are in the record, those in flight failed as REQUEST_ABORTED` +
            `${record.unsent > 0 ? `, ${record.unsent} never sent are counted as unsent` : ''}\n`,
    )
    return stop.exitCode
  }
  if (record.cellFailure !== null) {
    io.stdout.write(`${renderSummary(record, out)}\n`)
    io.stderr.write(`servegate: the cell failed: ${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}\n`)
    return 1
  }
  if (record.completed === 0 && record.failed !== null && record.failed > 0) {
    io.stdout.write(`${renderSummary(record, out)}\n`)
    const codes = Object.entries(record.failures)
      .sort((a, b) => b[1] - a[1])
      .map(([code, n]) => `${n} ${code}`)
      .join(', ')
    const example = first === null ? '' : `; the first: ${first.message}`
    io.stderr.write(`servegate: the cell measured nothing: all ${record.failed} requests failed (${codes})${example}\n`)
    return EXIT_NOTHING_MEASURED
  }
  if (values.json === true) {
    const { metrics, completed, failed, failures, harness } = record
    io.stdout.write(`${JSON.stringify({ metrics, completed, failed, failures, harness, record: out }, null, 2)}\n`)
  } else {
    io.stdout.write(`${renderSummary(record, out)}\n`)
  }
  return 0
}
