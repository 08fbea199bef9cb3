import { distribution } from '../metrics/distribution.ts'
import { PERCENTILE_METHOD } from '../schema/run.ts'
import type { GpuDeviceSummary, GpuSample, GpuSamples, GpuSummary, GpuWorstValue, NullReasons } from '../schema/telemetry.ts'

/** The load window and what it produced; epoch milliseconds, like the samples. */
export interface GpuLoadWindow {
  /** Output tokens of the cell (ok requests); null when unknown. */
  outputTokens: number | null
  /** `markLoadStart()`'s return; samples before it are the idle baseline. */
  loadStartedAt: number | null
  /** When the last request finished. */
  loadEndedAt: number | null
}

/** Energy over the window needs power samples covering at least this share of it. */
const MIN_ENERGY_COVERAGE = 0.95

const FIGURES = [
  'idlePowerW',
  'peakMemoryUsedMiB',
  'peakProcessVramEstimateMiB',
  'activePowerMeanW',
  'activePowerP95W',
  'temperatureP95C',
  'utilizationMeanPct',
  'energyJ',
  'idleSubtractedEnergyJ',
  'idleSubtractedJPerOutputToken',
] as const satisfies ReadonlyArray<keyof GpuDeviceSummary>
type Figure = (typeof FIGURES)[number]

function values(samples: readonly GpuSample[], pick: (s: GpuSample) => number | null): number[] {
  const out: number[] = []
  for (const s of samples) {
    const v = pick(s)
    if (v !== null) out.push(v)
  }
  return out
}

/**
 * ∫ power dt over [start, end] in joules: trapezoids between consecutive samples, clipped to the
 * window by linear interpolation. `coverage` is the share of the window the samples span.
 */
export function integrateEnergy(
  points: ReadonlyArray<{ t: number; w: number }>,
  start: number,
  end: number,
): { joules: number; coverage: number } {
  if (!(end > start)) return { joules: 0, coverage: 0 }
  let joules = 0
  let covered = 0
  for (let i = 1; i < points.length; i++) {
    const p0 = points[i - 1] as { t: number; w: number }
    const p1 = points[i] as { t: number; w: number }
    if (!(p1.t > p0.t)) continue
    const a = Math.max(p0.t, start)
    const b = Math.min(p1.t, end)
    if (!(b > a)) continue
    const at = (t: number): number => p0.w + ((p1.w - p0.w) * (t - p0.t)) / (p1.t - p0.t)
    joules += ((at(a) + at(b)) / 2) * ((b - a) / 1000)
    covered += b - a
  }
  return { joules, coverage: covered / (end - start) }
}

function summarizeDevice(index: number, all: readonly GpuSample[], window: GpuLoadWindow): GpuDeviceSummary {
  const reasons: NullReasons = {}
  const out: Record<Figure, number | null> = {
    idlePowerW: null,
    peakMemoryUsedMiB: null,
    peakProcessVramEstimateMiB: null,
    activePowerMeanW: null,
    activePowerP95W: null,
    temperatureP95C: null,
    utilizationMeanPct: null,
    energyJ: null,
    idleSubtractedEnergyJ: null,
    idleSubtractedJPerOutputToken: null,
  }
  const { loadStartedAt: start, loadEndedAt: end } = window
  const windowKnown = start !== null && end !== null && end >= start
  const baseline = start === null ? [] : all.filter((s) => s.timestampMs < start)
  const load = windowKnown ? all.filter((s) => s.timestampMs >= start && s.timestampMs <= end) : []
  const noWindow =
    start === null
      ? 'the load start was not marked (markLoadStart), so baseline and load cannot be told apart'
      : end === null
        ? 'the load end is unknown'
        : end < start
          ? 'the load ended before it started'
          : null
  const noBaseline = noWindow ?? 'no sample before the load started: start the sampler at least one interval earlier'
  const noLoad = noWindow ?? 'no sample inside the load window: it was shorter than the sampling interval'
  const absentField = (what: string): string => `nvidia-smi reported no ${what} for this GPU ([N/A] or [Not Supported])`

  const peakMem = values(all, (s) => s.memoryUsedMiB)
  if (peakMem.length > 0) out.peakMemoryUsedMiB = Math.max(...peakMem)
  else reasons.peakMemoryUsedMiB = all.length === 0 ? 'no samples' : absentField('memory used')

  const basePower = values(baseline, (s) => s.powerW)
  if (baseline.length === 0) reasons.idlePowerW = noBaseline
  else if (basePower.length === 0) reasons.idlePowerW = absentField('power draw')
  else out.idlePowerW = distribution(basePower).p50

  const baseMem = values(baseline, (s) => s.memoryUsedMiB)
  const loadMem = values(load, (s) => s.memoryUsedMiB)
  if (baseline.length === 0) reasons.peakProcessVramEstimateMiB = noBaseline
  else if (load.length === 0) reasons.peakProcessVramEstimateMiB = noLoad
  else if (baseMem.length === 0 || loadMem.length === 0) reasons.peakProcessVramEstimateMiB = absentField('memory used')
  else out.peakProcessVramEstimateMiB = Math.max(...loadMem) - (distribution(baseMem).p50 as number)

  const loadPower = values(load, (s) => s.powerW)
  const loadTemp = values(load, (s) => s.temperatureC)
  const loadUtil = values(load, (s) => s.utilizationPct)
  const fromLoad = (field: Figure, vs: number[], what: string, pick: (d: ReturnType<typeof distribution>) => number | null): void => {
    if (load.length === 0) reasons[field] = noLoad
    else if (vs.length === 0) reasons[field] = absentField(what)
    else out[field] = pick(distribution(vs))
  }
  fromLoad('activePowerMeanW', loadPower, 'power draw', (d) => d.mean)
  fromLoad('activePowerP95W', loadPower, 'power draw', (d) => d.p95)
  fromLoad('temperatureP95C', loadTemp, 'temperature', (d) => d.p95)
  fromLoad('utilizationMeanPct', loadUtil, 'utilization', (d) => d.mean)

  const powerPoints = all.flatMap((s) => (s.powerW === null ? [] : [{ t: s.timestampMs, w: s.powerW }]))
  if (noWindow !== null) reasons.energyJ = noWindow
  else if (powerPoints.length === 0) reasons.energyJ = absentField('power draw')
  else if (end === start) reasons.energyJ = 'the load window has zero length'
  else {
    const { joules, coverage } = integrateEnergy(powerPoints, start as number, end as number)
    if (coverage >= MIN_ENERGY_COVERAGE) out.energyJ = joules
    else
      reasons.energyJ =
        `power samples cover ${(coverage * 100).toFixed(0)}% of the load window (need ${MIN_ENERGY_COVERAGE * 100}%): ` +
        'the sampler started late or stopped early'
  }

  if (out.energyJ === null) reasons.idleSubtractedEnergyJ = `no energy: ${reasons.energyJ}`
  else if (out.idlePowerW === null) reasons.idleSubtractedEnergyJ = `no idle power: ${reasons.idlePowerW}`
  else out.idleSubtractedEnergyJ = out.energyJ - out.idlePowerW * (((end as number) - (start as number)) / 1000)

  const tokens = window.outputTokens
  if (out.idleSubtractedEnergyJ === null) reasons.idleSubtractedJPerOutputToken = reasons.idleSubtractedEnergyJ as string
  else if (tokens === null) reasons.idleSubtractedJPerOutputToken = 'the output token count is unknown'
  else if (tokens <= 0) reasons.idleSubtractedJPerOutputToken = 'the cell produced no output tokens'
  else out.idleSubtractedJPerOutputToken = out.idleSubtractedEnergyJ / tokens

  return { index, baselineSamples: baseline.length, loadSamples: load.length, ...out, reasons }
}

/** The largest per-device value of each figure, with the device it came from. */
function worstOf(devices: readonly GpuDeviceSummary[]): Record<Figure, GpuWorstValue> {
  const entries = FIGURES.map((figure): [Figure, GpuWorstValue] => {
    let best: GpuDeviceSummary | null = null
    for (const d of devices) {
      const v = d[figure]
      if (v !== null && (best === null || v > (best[figure] as number))) best = d
    }
    if (best !== null) return [figure, { value: best[figure], deviceIndex: best.index, reason: null }]
    const reason =
      devices.length === 0 ? 'no GPU was sampled' : [...new Set(devices.map((d) => d.reasons[figure] ?? 'no value'))].join('; ')
    return [figure, { value: null, deviceIndex: null, reason }]
  })
  return Object.fromEntries(entries) as Record<Figure, GpuWorstValue>
}

/**
 * Per-device GPU figures of a cell and the worst single device for each (never a sum across
 * GPUs): idle power (median of the baseline), peak memory and the engine's VRAM estimate, active
 * power mean and p95 (nearest-rank), temperature p95, utilization mean, energy over the load window
 * (trapezoid, clipped), idle-subtracted energy and idle-subtracted joules per output token. Pure;
 * every figure that cannot be measured is null with its reason.
 * @example summarizeGpu(await sampler.stop(), { outputTokens: 4096, loadStartedAt, loadEndedAt })
 */
export function summarizeGpu(samples: GpuSamples, window: GpuLoadWindow): GpuSummary {
  if (samples.status === 'absent') return samples
  const devices = samples.devices.map((index) =>
    summarizeDevice(
      index,
      samples.samples.filter((s) => s.index === index).sort((a, b) => a.timestampMs - b.timestampMs),
      window,
    ),
  )
  return {
    status: 'ok',
    percentileMethod: PERCENTILE_METHOD,
    intervalMs: samples.intervalMs,
    loadStartedAt: window.loadStartedAt,
    loadEndedAt: window.loadEndedAt,
    outputTokens: window.outputTokens,
    devices,
    worst: worstOf(devices),
    pollErrors: samples.pollErrors,
    lastPollError: samples.lastPollError,
  }
}
