import { describe, expect, test } from 'vitest'
import { z } from 'zod'
import { compareHistogramTotals } from '../telemetry/agreement.ts'
import { summarizeGpu } from '../telemetry/gpu-summary.ts'
import { parseExposition } from '../telemetry/exposition.ts'
import { reachedConcurrency, readEngineMetrics, timingDeltas } from '../telemetry/prometheus.ts'
import { CellTelemetry, EngineOccupancy, GpuSummary } from './telemetry.ts'

const gpuSamples = {
  status: 'ok' as const,
  intervalMs: 500,
  devices: [0],
  samples: [
    { index: 0, timestampMs: 0, powerW: 70, memoryUsedMiB: 500, temperatureC: 30, utilizationPct: 0 },
    { index: 0, timestampMs: 1000, powerW: 600, memoryUsedMiB: 60000, temperatureC: 60, utilizationPct: 99 },
    { index: 0, timestampMs: 2000, powerW: 600, memoryUsedMiB: 60000, temperatureC: 61, utilizationPct: 99 },
  ],
  startedAt: 0,
  stoppedAt: 2000,
  loadStartedAt: 500,
  polls: 3,
  pollErrors: 0,
  lastPollError: null,
}

function occupancy(): EngineOccupancy {
  const before = {
    atMs: 0,
    reading: readEngineMetrics(
      parseExposition(
        'vllm:num_requests_running{engine="0"} 0\nvllm:request_prefill_time_seconds_sum 0\nvllm:request_prefill_time_seconds_count 0',
      ),
      'vllm',
    ),
  }
  const after = {
    atMs: 1000,
    reading: readEngineMetrics(
      parseExposition(
        'vllm:num_requests_running{engine="0"} 4\nvllm:request_prefill_time_seconds_sum 0.4\nvllm:request_prefill_time_seconds_count 4',
      ),
      'vllm',
    ),
  }
  const deltas = timingDeltas(before, after, 'vllm')
  return {
    kind: 'vllm',
    url: 'http://127.0.0.1:8000/metrics',
    intervalMs: 250,
    scrapes: 2,
    scrapeErrors: 0,
    lastScrapeError: null,
    runningMax: 4,
    waitingMax: null,
    kvUsageMax: null,
    preemptions: 0,
    timings: deltas.timings,
    reasons: { waitingMax: 'not exposed', kvUsageMax: 'not exposed', ...deltas.reasons },
  }
}

describe('CellTelemetry', () => {
  test('what the telemetry modules produce is a valid block and survives JSON', () => {
    const engine = occupancy()
    const block: CellTelemetry = {
      gpu: {
        status: 'ok',
        facts: [{ index: 0, name: 'NVIDIA H100 80GB HBM3', uuid: 'GPU-5e2f', driverVersion: '550.54.15', memoryTotalMiB: 81559 }],
        visibleDevices: null,
        summary: summarizeGpu(gpuSamples, { outputTokens: 100, loadStartedAt: 500, loadEndedAt: 2000 }),
      },
      engine: { status: 'ok', occupancy: engine, concurrency: reachedConcurrency(engine, 4) },
      hostMemory: { status: 'absent', reason: 'not Linux' },
      timingAgreement: {
        status: 'ok',
        comparisons: [
          compareHistogramTotals({
            metric: 'prefill',
            engineSource: 'e',
            clientSource: 'c',
            engine: engine.timings.prefill,
            clientMs: [120, 130, 110, 140],
          }),
        ],
      },
    }
    const parsed = CellTelemetry.parse(block)
    expect(JSON.parse(JSON.stringify(parsed))).toEqual(block)
  })

  test('a machine without a GPU or engine metrics records absent blocks with reasons', () => {
    const absent = {
      gpu: { status: 'absent', reason: 'nvidia-smi not found (ENOENT): no NVIDIA driver tools on this host' },
      engine: { status: 'absent', reason: 'in-process engine: no /metrics' },
      hostMemory: { status: 'absent', reason: 'not Linux' },
      timingAgreement: { status: 'absent', reason: 'no engine timings' },
    }
    expect(CellTelemetry.parse(absent)).toEqual(absent)
    expect(() => CellTelemetry.parse({ ...absent, gpu: { status: 'absent' } })).toThrow()
  })

  test('preemptions: a count of the measured phase; null in a record written before it was kept', () => {
    const engine = occupancy()
    expect(EngineOccupancy.parse({ ...engine, preemptions: 12 }).preemptions).toBe(12)
    const { preemptions: _, ...older } = engine
    expect(EngineOccupancy.parse(older).preemptions).toBeNull()
    expect(EngineOccupancy.safeParse({ ...engine, preemptions: -1 }).success).toBe(false)
  })

  test('non-finite numbers are rejected: the block stays JSON-safe', () => {
    const summary = summarizeGpu(gpuSamples, { outputTokens: 100, loadStartedAt: 500, loadEndedAt: 2000 })
    if (summary.status !== 'ok') throw new Error('expected ok')
    expect(GpuSummary.safeParse(summary).success).toBe(true)
    const broken = { ...summary, devices: [{ ...summary.devices[0], energyJ: Number.POSITIVE_INFINITY }] }
    expect(GpuSummary.safeParse(broken).success).toBe(false)
  })

  test('has a JSON Schema (it will be published inside servegate.run/v1)', () => {
    const schema = z.toJSONSchema(CellTelemetry, { target: 'draft-2020-12', io: 'output' }) as { properties: Record<string, unknown> }
    expect(Object.keys(schema.properties)).toEqual(['gpu', 'engine', 'hostMemory', 'timingAgreement'])
  })
})
