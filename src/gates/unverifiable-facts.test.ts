/**
 * GPU facts a remote arm could not learn: the pair is not refused for them, and the check says
 * which fact was unverifiable, on which arm and why. nvidia-smi's facts here compare as before.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { failureOf } from '../../fixtures/matchers.ts'
import { testManifest } from '../../fixtures/manifest.ts'
import { test } from '../../fixtures/test-context.ts'
import { runCell } from '../runner/measure-cell.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { PairResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { pairMismatches, pairUnverifiable } from './fairness.ts'

let sim: SimServer
let base: RunRecord
beforeAll(async () => {
  sim = await startSimServer({ model: 'm', decodeTokPerS: 2000 })
  base = await runCell({ baseUrl: sim.url, model: 'm', requests: 4, maxTokens: 4, workload: { promptTokens: 32, seed: 5 } })
})
afterAll(() => sim.close())

const EXPORTER = 'http://10.0.0.5:9400/metrics'
const L4 = { index: 0, name: 'NVIDIA L4', uuid: 'GPU-c2f76b33', driverVersion: '580.105.08', memoryTotalMiB: 23033, powerW: 16.4 }

const withGpus = (gpus: Manifest['gpus']): RunRecord => ({ ...base, manifest: { ...testManifest(), gpus } })
const fromExporter = (device: { name?: string | null; driverVersion?: string | null } = {}): RunRecord =>
  withGpus({ status: 'ok', devices: [{ ...L4, ...device }], source: 'dcgm-exporter', url: EXPORTER, note: 'n' })
const unknownGpus = (): RunRecord =>
  withGpus({
    status: 'unknown',
    reason: 'the engine is on another host, whose GPUs nvidia-smi here cannot see; set gpuMetricsUrl (--gpu-metrics-url) …',
  })
const local = (): RunRecord => withGpus(testManifest().gpus)
const pairOf = (b: RunRecord, c: RunRecord): PairResult => ({
  kind: 'pair',
  id: 'p',
  baseline: [b],
  candidate: [c],
  launchOrder: ['baseline', 'candidate'],
})
const gpuFindings = (findings: string[]) => findings.filter((f) => f.startsWith('GPU'))

describe('unverifiable GPU facts', () => {
  test('a remote arm whose GPUs nothing could read: not refused for them, each GPU fact said unverifiable with the reason', () => {
    const p = { baseline: [local()], candidate: [unknownGpus()] }
    expect(gpuFindings(pairMismatches(p))).toEqual([])
    expect(pairUnverifiable(p)).toEqual([
      'GPU model and memory: unverifiable on candidate (the engine is on another host, whose GPUs nvidia-smi here cannot see; set gpuMetricsUrl (--gpu-metrics-url) …)',
      'GPU driver: unverifiable on candidate (the engine is on another host, whose GPUs nvidia-smi here cannot see; set gpuMetricsUrl (--gpu-metrics-url) …)',
    ])
  })

  test('an exporter without the driver label: the model and memory are compared, the driver alone is unverifiable', () => {
    const p = { baseline: [fromExporter()], candidate: [fromExporter({ driverVersion: null })] }
    expect(gpuFindings(pairMismatches(p))).toEqual([])
    expect(pairUnverifiable(p)).toEqual([
      `GPU driver: unverifiable on candidate (the dcgm-exporter at ${EXPORTER} reports no DCGM_FI_DRIVER_VERSION label for GPU 0)`,
    ])
    const other = { baseline: [fromExporter()], candidate: [fromExporter({ name: 'NVIDIA H100 80GB HBM3', driverVersion: null })] }
    expect(gpuFindings(pairMismatches(other))).toEqual([
      'GPU model and memory: baseline [{"name":"NVIDIA L4","memoryTotalMiB":23033}] ≠ [{"name":"NVIDIA H100 80GB HBM3","memoryTotalMiB":23033}] (1/2 launches as the baseline)',
    ])
  })

  test('facts both exporters report are compared as facts: equal is matched, a different driver is refused', () => {
    expect(pairUnverifiable({ baseline: [fromExporter()], candidate: [fromExporter()] })).toEqual([])
    expect(gpuFindings(pairMismatches({ baseline: [fromExporter()], candidate: [fromExporter({ driverVersion: '570.86.10' })] }))).toEqual([
      'GPU driver: baseline ["580.105.08"] ≠ ["570.86.10"] (1/2 launches as the baseline)',
    ])
  })

  test('nvidia-smi’s facts on this host are compared as before, a null included: never called unverifiable', () => {
    const m = testManifest()
    const noDriver = withGpus(
      m.gpus.status === 'ok' ? { status: 'ok', devices: m.gpus.devices.map((d) => ({ ...d, driverVersion: null })) } : m.gpus,
    )
    const p = { baseline: [local()], candidate: [noDriver] }
    expect(pairUnverifiable(p)).toEqual([])
    expect(gpuFindings(pairMismatches(p))).toEqual(['GPU driver: baseline ["550.54.15"] ≠ [null] (1/2 launches as the baseline)'])
  })

  test('toBeMatchedPair passes such a pair and says what it could not verify', () => {
    const p = pairOf(local(), unknownGpus())
    expect(p).toBeMatchedPair()
    const message = failureOf(() => expect(p).not.toBeMatchedPair())
    expect(message).toContain('Unverifiable: GPU model and memory: unverifiable on candidate (the engine is on another host')
    expect(message).toContain('(not compared: unknown, never guessed)')
    expect(failureOf(() => expect(pairOf(local(), local())).not.toBeMatchedPair())).not.toContain('Unverifiable')
  })

  test('servegate compare: matched, and the unverifiable facts listed (text and --json)', async ({ cli, tmpDir }) => {
    await writeFile(join(tmpDir, 'local.json'), JSON.stringify(local()))
    await writeFile(join(tmpDir, 'remote.json'), JSON.stringify(unknownGpus()))
    const text = await cli(['compare', join(tmpDir, 'local.json'), join(tmpDir, 'remote.json')])
    expect(text.stdout).toMatch(
      /^pair checks: matched\n {2}unverifiable: GPU model and memory: unverifiable on candidate \(the engine is on another host/m,
    )
    expect(text.stdout).toMatch(/^ {2}unverifiable: GPU driver: unverifiable on candidate/m)
    const json = await cli(['compare', join(tmpDir, 'local.json'), join(tmpDir, 'remote.json'), '--json'])
    const report = JSON.parse(json.stdout) as { matched: boolean; unverifiable?: string[] }
    expect(report.matched).toBe(true)
    expect(report.unverifiable).toEqual(pairUnverifiable({ baseline: [local()], candidate: [unknownGpus()] }))
    const same = JSON.parse((await cli(['compare', join(tmpDir, 'local.json'), join(tmpDir, 'local.json'), '--json'])).stdout) as object
    expect(same).not.toHaveProperty('unverifiable')
  })
})
