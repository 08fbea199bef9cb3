import { describe, expect, test } from 'vitest'
import type { GpuSample, GpuSamples } from '../schema/telemetry.ts'
import { integrateEnergy, summarizeGpu } from './gpu-summary.ts'

function sample(
  index: number,
  timestampMs: number,
  powerW: number | null,
  memoryUsedMiB: number | null,
  temperatureC = 40,
  utilizationPct = 0,
): GpuSample {
  return { index, timestampMs, powerW, memoryUsedMiB, temperatureC, utilizationPct }
}

function samples(list: GpuSample[], devices = [0]): GpuSamples {
  return {
    status: 'ok',
    intervalMs: 500,
    devices,
    samples: list,
    startedAt: 0,
    stoppedAt: 4000,
    loadStartedAt: 1000,
    polls: list.length,
    pollErrors: 0,
    lastPollError: null,
  }
}

/** Idle 70 W / 500 MiB at t = 0 and 500 ms; 600 W from 1000 to 3000 ms; idle again at 3500. */
const oneGpu = [
  sample(0, 0, 70, 500),
  sample(0, 500, 70, 500),
  sample(0, 1000, 600, 60000, 60, 90),
  sample(0, 1500, 600, 62000, 62, 100),
  sample(0, 2000, 600, 64000, 64, 100),
  sample(0, 2500, 600, 63000, 66, 100),
  sample(0, 3000, 600, 61000, 68, 90),
  sample(0, 3500, 70, 500),
]

describe('integrateEnergy', () => {
  test('trapezoids clipped to the window by interpolation', () => {
    const points = [
      { t: 1000, w: 100 },
      { t: 2000, w: 300 },
      { t: 3000, w: 100 },
    ]
    // 1250 → 2000: 150 → 300 W over 0.75 s; 2000 → 2750: 300 → 150 W over 0.75 s.
    expect(integrateEnergy(points, 1250, 2750)).toEqual({ joules: 337.5, coverage: 1 })
  })

  test('coverage counts only the part of the window the samples span', () => {
    expect(
      integrateEnergy(
        [
          { t: 0, w: 100 },
          { t: 1000, w: 100 },
        ],
        500,
        2500,
      ),
    ).toEqual({ joules: 50, coverage: 0.25 })
    expect(integrateEnergy([{ t: 0, w: 100 }], 0, 1000)).toEqual({ joules: 0, coverage: 0 })
    expect(
      integrateEnergy(
        [
          { t: 0, w: 100 },
          { t: 10, w: 100 },
        ],
        5,
        5,
      ),
    ).toEqual({ joules: 0, coverage: 0 })
  })
})

describe('summarizeGpu', () => {
  test('every figure of one device, exact', () => {
    const summary = summarizeGpu(samples(oneGpu), { outputTokens: 530, loadStartedAt: 1000, loadEndedAt: 3000 })
    expect(summary).toMatchObject({ status: 'ok', percentileMethod: 'nearest-rank', intervalMs: 500, outputTokens: 530 })
    if (summary.status !== 'ok') return
    expect(summary.devices).toEqual([
      {
        index: 0,
        baselineSamples: 2,
        loadSamples: 5,
        idlePowerW: 70,
        peakMemoryUsedMiB: 64000,
        peakProcessVramEstimateMiB: 63500,
        activePowerMeanW: 600,
        activePowerP95W: 600,
        temperatureP95C: 68,
        utilizationMeanPct: 96,
        energyJ: 1200,
        idleSubtractedEnergyJ: 1060,
        idleSubtractedJPerOutputToken: 2,
        reasons: {},
      },
    ])
    expect(summary.worst.idleSubtractedJPerOutputToken).toEqual({ value: 2, deviceIndex: 0, reason: null })
  })

  test('a window between samples is integrated by interpolation (sample before and after it)', () => {
    const summary = summarizeGpu(samples(oneGpu), { outputTokens: 100, loadStartedAt: 750, loadEndedAt: 3250 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    // 750 → 1000: 335 → 600 W; 1000 → 3000: 600 W; 3000 → 3250: 600 → 335 W.
    expect(summary.devices[0]?.energyJ).toBeCloseTo(((335 + 600) / 2) * 0.25 * 2 + 1200, 9)
  })

  test('two GPUs: the worst single device per figure, never a sum', () => {
    const two = [...oneGpu, sample(1, 0, 65, 400), sample(1, 1000, 500, 70000), sample(1, 2000, 500, 70000), sample(1, 3000, 500, 70000)]
    const summary = summarizeGpu(samples(two, [0, 1]), { outputTokens: 1000, loadStartedAt: 500, loadEndedAt: 3000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    expect(summary.devices.map((d) => d.index)).toEqual([0, 1])
    expect(summary.worst.peakMemoryUsedMiB).toEqual({ value: 70000, deviceIndex: 1, reason: null })
    expect(summary.worst.activePowerP95W).toEqual({ value: 600, deviceIndex: 0, reason: null })
    expect(summary.worst.idlePowerW).toEqual({ value: 70, deviceIndex: 0, reason: null })
    expect(summary.worst.peakProcessVramEstimateMiB).toEqual({ value: 69600, deviceIndex: 1, reason: null })
  })

  test('load start never marked: baseline and load figures null with the reason', () => {
    const summary = summarizeGpu(samples(oneGpu), { outputTokens: 10, loadStartedAt: null, loadEndedAt: 3000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    const why = 'the load start was not marked (markLoadStart), so baseline and load cannot be told apart'
    expect(summary.devices[0]).toEqual({
      index: 0,
      baselineSamples: 0,
      loadSamples: 0,
      idlePowerW: null,
      peakMemoryUsedMiB: 64000,
      peakProcessVramEstimateMiB: null,
      activePowerMeanW: null,
      activePowerP95W: null,
      temperatureP95C: null,
      utilizationMeanPct: null,
      energyJ: null,
      idleSubtractedEnergyJ: null,
      idleSubtractedJPerOutputToken: null,
      reasons: {
        idlePowerW: why,
        peakProcessVramEstimateMiB: why,
        activePowerMeanW: why,
        activePowerP95W: why,
        temperatureP95C: why,
        utilizationMeanPct: why,
        energyJ: why,
        idleSubtractedEnergyJ: `no energy: ${why}`,
        idleSubtractedJPerOutputToken: `no energy: ${why}`,
      },
    })
  })

  test('no baseline sample: idle figures null, load figures kept', () => {
    const summary = summarizeGpu(samples(oneGpu.slice(2)), { outputTokens: 10, loadStartedAt: 1000, loadEndedAt: 3000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    const d = summary.devices[0]
    const why = 'no sample before the load started: start the sampler at least one interval earlier'
    expect(d).toMatchObject({
      idlePowerW: null,
      peakProcessVramEstimateMiB: null,
      energyJ: 1200,
      idleSubtractedEnergyJ: null,
      activePowerMeanW: 600,
    })
    expect(d?.reasons).toEqual({
      idlePowerW: why,
      peakProcessVramEstimateMiB: why,
      idleSubtractedEnergyJ: `no idle power: ${why}`,
      idleSubtractedJPerOutputToken: `no idle power: ${why}`,
    })
  })

  test('a load window shorter than the interval holds no sample', () => {
    const summary = summarizeGpu(samples(oneGpu), { outputTokens: 10, loadStartedAt: 1100, loadEndedAt: 1400 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    const why = 'no sample inside the load window: it was shorter than the sampling interval'
    expect(summary.devices[0]).toMatchObject({
      loadSamples: 0,
      activePowerMeanW: null,
      energyJ: 180,
      reasons: { activePowerMeanW: why, temperatureP95C: why },
    })
  })

  test('samples that stop early do not cover the window: no energy', () => {
    const summary = summarizeGpu(samples(oneGpu.slice(0, 4)), { outputTokens: 10, loadStartedAt: 1000, loadEndedAt: 3000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    expect(summary.devices[0]?.energyJ).toBeNull()
    expect(summary.devices[0]?.reasons.energyJ).toBe(
      'power samples cover 25% of the load window (need 95%): the sampler started late or stopped early',
    )
  })

  test.each([
    [null, 'the output token count is unknown'],
    [0, 'the cell produced no output tokens'],
  ])('outputTokens %j: no joules per token', (outputTokens, reason) => {
    const summary = summarizeGpu(samples(oneGpu), { outputTokens, loadStartedAt: 1000, loadEndedAt: 3000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    expect(summary.devices[0]).toMatchObject({
      idleSubtractedEnergyJ: 1060,
      idleSubtractedJPerOutputToken: null,
      reasons: { idleSubtractedJPerOutputToken: reason },
    })
  })

  test('a load end before its start, and a device with no samples', () => {
    const summary = summarizeGpu(samples([], [3]), { outputTokens: 10, loadStartedAt: 2000, loadEndedAt: 1000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    expect(summary.devices[0]?.reasons).toMatchObject({ peakMemoryUsedMiB: 'no samples', energyJ: 'the load ended before it started' })
    expect(summary.worst.peakMemoryUsedMiB).toEqual({ value: null, deviceIndex: null, reason: 'no samples' })
  })

  test('absent samples stay absent', () => {
    expect(summarizeGpu({ status: 'absent', reason: 'no driver' }, { outputTokens: 1, loadStartedAt: 0, loadEndedAt: 1 })).toEqual({
      status: 'absent',
      reason: 'no driver',
    })
  })
})
