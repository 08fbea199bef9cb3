import { resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { ABSENT, formatFixedPercent, formatPercent } from '../number-format.ts'
import { writeCapacityRecord } from '../record/record-writer.ts'
import { resolveEngineConfig } from '../engines/config.ts'
import {
  type CapacityHooks,
  type CapacityOptions,
  type ResolvedCapacityOptions,
  resolveCapacityOptions,
  searchCapacity,
} from '../runner/capacity-search.ts'
import type { CellPlan } from '../runner/cell-options.ts'
import { runCell } from '../runner/measure-cell.ts'
import { Runner } from '../runner/runner.ts'
import type { CapacityProbe, CapacitySearch } from '../schema/capacity-record.ts'
import {
  LOAD_FLAGS,
  cellFromFlags,
  checkInputFiles,
  environmentFromFlags,
  givenFlag,
  numberFlag,
  oneOf,
  RATE_SHAPE_FLAGS,
  rateArrival,
  readEngineConfig,
  requireTarget,
  targetAccess,
  sloFlag,
  TARGET_FLAGS,
  WORKLOAD_FLAGS,
} from './cell-flags.ts'
import { intFlag, parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'

const CAPACITY_HELP =
  'servegate capacity — find the highest rate (or concurrency) at which an endpoint or engine still meets an SLO' +
  `

A bracketing search: probe cells from --start, doubling after a probe whose requests meet the SLO and
halving after one that does not, then bisecting the bracket; each probe is judged by the Wilson interval
of its share of good requests and kept with its run record.

  --base-url URL [--remote] [--ca-file FILE] | --engine FILE, --model NAME, and the workload flags of servegate run (--prompt-tokens,
                            --max-tokens, --output-control, --warmup, …)
  --slo OBJECTIVES          required: ttft=MS,tpot=MS,e2e=MS,itl=MS[,itl-percentile=P], per request
  --slo-percentile P        percent of a probe's requests that must meet every objective, default 90
  --confidence C            two-sided confidence of each probe's interval, default 0.98
  --axis rate|concurrency   open-loop rate (requests/s, default) or closed-loop concurrency
  --start V                 required: the first value probed
  --min V, --max V          the range, default start/16 (1 for concurrency) to start×16
  --max-probes N            probe cells at most, default 8
  --resolution X            stop when high/low ≤ 1+X (rate) or high−low ≤ 1 (concurrency), default 0.1
  --requests N              requests per probe (rate probes: at least this many); default the fewest with which
                            an all-good probe can pass (49 at 90% and 0.98), twice that for concurrency probes
  --probe-seconds S         rate probes: rate × S requests each, default 20 (a probe of S seconds cannot see
                            an overload below about bound / (share × S); the record says how much)
  --arrival KIND            rate probes: constant (default), poisson or gamma; --burstiness B, --arrival-seed S,
                            --ramp-up-s S, --ramp-up-from R, --max-in-flight N as in servegate run
  --nvidia-smi PATH         nvidia-smi for the manifest's GPU facts and the GPU sampler, default nvidia-smi on PATH
  --send-lag-limit-ms MS, --event-loop-delay-limit-ms MS, --client-workers auto|N
                            harness bounds of each probe, as in servegate run (a probe beyond them stops the search)
  --out FILE                capacity record (servegate.capacity/v1, every probe's run record inside),
                            default servegate-runs/<id>.capacity.json
  --json                    print the bracket, status and probes as JSON instead of the table`

const FLAGS = {
  ...TARGET_FLAGS,
  ...WORKLOAD_FLAGS,
  ...LOAD_FLAGS,
  'slo-percentile': { type: 'string' },
  confidence: { type: 'string' },
  axis: { type: 'string' },
  start: { type: 'string' },
  min: { type: 'string' },
  max: { type: 'string' },
  'max-probes': { type: 'string' },
  resolution: { type: 'string' },
  'probe-seconds': { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

type CapacityFlags = ReturnType<typeof parseFlags<typeof FLAGS>>['values']

/** The search part of the flags; the cell part comes from the shared cell flags. */
function searchOptions(values: CapacityFlags, cell: CellPlan): CapacityOptions {
  const slo = sloFlag(values.slo)
  if (slo === undefined)
    throw new ServegateError('CONFIG_INVALID', '--slo is required; pass the objectives of one request, e.g. --slo ttft=500,tpot=50')
  const axis = oneOf('--axis', values.axis, ['rate', 'concurrency'] as const) ?? 'rate'
  const start = numberFlag('--start', values.start, { above: 0 }, 100_000)
  if (start === undefined)
    throw new ServegateError(
      'CONFIG_INVALID',
      `--start is required; pass the first ${axis === 'rate' ? 'rate (requests/s)' : 'concurrency'} to probe, e.g. --start 4`,
    )
  if (axis === 'concurrency') {
    const stray =
      givenFlag(values, [...RATE_SHAPE_FLAGS, 'max-in-flight']) ?? (values['probe-seconds'] === undefined ? undefined : '--probe-seconds')
    if (stray !== undefined)
      throw new ServegateError('CONFIG_INVALID', `${stray}: a concurrency search runs closed-loop probes; drop it, or pass --axis rate`)
  }
  const { requests, ...probeCell } = cell
  return {
    cell: axis === 'rate' ? { ...probeCell, arrival: rateArrival(values, 1, 'constant') } : probeCell,
    slo,
    percentile: numberFlag('--slo-percentile', values['slo-percentile'], { above: 0 }, 99.999),
    confidence: numberFlag('--confidence', values.confidence, { above: 0.5 }, 0.999999),
    bracket: {
      axis,
      start,
      min: numberFlag('--min', values.min, { above: 0 }, 100_000),
      max: numberFlag('--max', values.max, { above: 0 }, 100_000),
      maxProbes: intFlag('--max-probes', values['max-probes'], 1, 64),
      resolution: numberFlag('--resolution', values.resolution, { above: 0 }, 10),
    },
    requestsPerProbe: requests,
    probeSeconds: numberFlag('--probe-seconds', values['probe-seconds'], { above: 0 }, 86_400),
  }
}

/** The header of the probe table, in the columns of `probeRow`; `confidence` is each probe's interval's. */
function probeHeader(axis: CapacitySearch['axis'], confidence: number): string {
  const level = `${formatPercent(confidence)} interval`
  return (
    `probe  ${(axis === 'rate' ? 'req/s' : 'streams').padStart(9)}  ${'good'.padStart(9)}  ${'share'.padStart(6)}  ` +
    `${level.padStart(16)}  ${'send lag p99'.padStart(12)}  verdict`
  )
}

/** One probe as a table row: value, good of judged, share, interval, send lag, verdict. */
function probeRow(index: number, axis: CapacitySearch['axis'], p: CapacityProbe): string {
  const value = axis === 'rate' ? p.value.toFixed(2).padStart(9) : String(p.value).padStart(9)
  // An absent bound keeps its % sign, so the column reads [—%, —%] as it always has.
  const bound = (v: number | null) => (v === null ? `${ABSENT}%` : formatFixedPercent(v))
  const interval = `[${bound(p.low)}, ${bound(p.high)}]`
  const lag = p.sendLagP99Ms === null ? ABSENT : `${p.sendLagP99Ms.toFixed(2)} ms`
  const share = formatFixedPercent(p.fraction)
  const verdict = p.invalid === null ? p.outcome : `not judged: ${p.invalid}`
  return (
    `${String(index).padStart(5)}  ${value}  ${`${p.good}/${p.samples}`.padStart(9)}  ${share.padStart(6)}  ` +
    `${interval.padStart(16)}  ${lag.padStart(12)}  ${verdict}`
  )
}

/**
 * The search on an endpoint that is up, or on one launch of an engine that stays up for the
 * whole search (torn down after it whatever happens).
 */
async function search(values: CapacityFlags, options: ResolvedCapacityOptions, id: string, hooks: CapacityHooks): Promise<CapacitySearch> {
  const env = environmentFromFlags(values)
  if (values.engine === undefined) {
    const target = { baseUrl: values['base-url'] as string, model: values.model as string, ...targetAccess(values) }
    return searchCapacity(options, (cell, signal) => runCell({ ...cell, ...target }, { signal, clock: env.clock }), id, hooks)
  }
  const config = resolveEngineConfig(await readEngineConfig(values.engine))
  const engine = { id: 'cli', name: `${config.kind}:${config.model.id}`, config }
  return new Runner(env).capacity({ id, engine, options, launch: 'fresh' }, hooks)
}

/** `servegate capacity`: runs the search, prints each probe as it ends and the bracket, writes the capacity record. */
export async function capacityCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('capacity', argv, FLAGS)
  if (values.help === true) {
    io.stdout.write(`${CAPACITY_HELP}\n`)
    return 0
  }
  requireTarget(values)
  targetAccess(values)
  // Checked before any engine starts: a bad option or dataset costs nothing.
  const options = resolveCapacityOptions(searchOptions(values, cellFromFlags(values)))
  await checkInputFiles(values)
  const axis = options.bracket.axis
  const name = values.engine === undefined ? (values.model as string).replace(/[^A-Za-z0-9._-]+/g, '_') : 'engine'
  const id = `${name}-capacity-${axis}`
  if (values.json !== true) io.stdout.write(`${probeHeader(axis, options.confidence)}\n`)
  let index = 0
  const found = await search(values, options, id, {
    signal,
    onProbe: (p) => {
      index++
      if (values.json !== true) io.stdout.write(`${probeRow(index, axis, p)}\n`)
    },
  })
  const out = resolve(values.out ?? `servegate-runs/${id}.capacity.json`)
  await writeCapacityRecord(out, found)
  if (values.json === true) {
    const { records: _records, ...summary } = found
    io.stdout.write(`${JSON.stringify({ ...summary, record: out }, null, 2)}\n`)
  } else {
    io.stdout.write(`${found.summary}\n${found.warnings.map((w) => `warning: ${w}\n`).join('')}capacity record: ${out}\n`)
  }
  if (found.status === 'interrupted') {
    io.stderr.write('servegate: interrupted; the probes measured so far are in the record\n')
    return 130
  }
  if (found.status === 'cell-failed' || found.status === 'harness-limited') {
    io.stderr.write(`servegate: the search stopped: ${found.status}: ${found.probes[found.probes.length - 1]?.invalid ?? ''}\n`)
    return 1
  }
  return 0
}
