import { readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { summarizeGpu } from './gpu-summary.ts'
import {
  parseGpuFacts,
  parseGpuSamples,
  parseMigEnabled,
  parseNvidiaSmiTimestamp,
  queryGpuFacts,
  selectVisibleGpus,
  startGpuSampler,
} from './nvidia-smi.ts'

const fake = (name: string): string => fileURLToPath(new URL(`../../fixtures/fakes/${name}`, import.meta.url))
const NVIDIA_SMI = fake('nvidia-smi')
const H100 = { name: 'NVIDIA H100 80GB HBM3', driverVersion: '550.54.15', memoryTotalMiB: 81559 }
const UUID0 = 'GPU-5e2f1c3a-7b9d-4c1e-8f2a-0d6b3e9c1a47'
const UUID1 = 'GPU-a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d'
const TWO = { FAKE_NVIDIA_SMI_GPUS: '2' }

describe('parsing nvidia-smi output', () => {
  test('timestamps are its local time with milliseconds', () => {
    expect(parseNvidiaSmiTimestamp('2024/05/14 10:32:11.123')).toBe(new Date(2024, 4, 14, 10, 32, 11, 123).getTime())
    expect(parseNvidiaSmiTimestamp('2024/05/14 10:32:11')).toBe(new Date(2024, 4, 14, 10, 32, 11, 0).getTime())
    expect(parseNvidiaSmiTimestamp('[N/A]')).toBeNull()
  })

  test('facts: [N/A] and [Not Supported] become null, never a guess', () => {
    const out =
      `0, NVIDIA H100 80GB HBM3, ${UUID0}, 550.54.15, 81559\n` + '1, GRID A100D-40C, [N/A], [Not Supported], [N/A]\nNo devices were found\n'
    expect(parseGpuFacts(out)).toEqual({
      gpus: [
        { index: 0, uuid: UUID0, ...H100 },
        { index: 1, name: 'GRID A100D-40C', uuid: null, driverVersion: null, memoryTotalMiB: null },
      ],
      invalid: ['No devices were found'],
    })
  })

  test('samples: every field parsed, [N/A] power is null', () => {
    const out = '0, 2024/05/14 10:32:11.123, 68.52, 534, 33, 0\n1, 2024/05/14 10:32:11.124, [N/A], 71234, 64, 97\n'
    expect(parseGpuSamples(out, 0).samples).toEqual([
      {
        index: 0,
        timestampMs: new Date(2024, 4, 14, 10, 32, 11, 123).getTime(),
        powerW: 68.52,
        memoryUsedMiB: 534,
        temperatureC: 33,
        utilizationPct: 0,
      },
      {
        index: 1,
        timestampMs: new Date(2024, 4, 14, 10, 32, 11, 124).getTime(),
        powerW: null,
        memoryUsedMiB: 71234,
        temperatureC: 64,
        utilizationPct: 97,
      },
    ])
  })
})

describe('queryGpuFacts', () => {
  test('one GPU from the fake nvidia-smi, every fact exact', async () => {
    expect(await queryGpuFacts({ executable: NVIDIA_SMI, visibleDevices: null })).toEqual({
      status: 'ok',
      gpus: [{ index: 0, uuid: UUID0, ...H100 }],
      visibleDevices: null,
      note: null,
    })
  })

  test('two GPUs, all kept when CUDA_VISIBLE_DEVICES is not given', async () => {
    const facts = await queryGpuFacts({ executable: NVIDIA_SMI, env: { ...TWO, CUDA_VISIBLE_DEVICES: undefined }, visibleDevices: null })
    expect(facts.status === 'ok' && facts.gpus.map((g) => [g.index, g.uuid])).toEqual([
      [0, UUID0],
      [1, UUID1],
    ])
  })

  test('CUDA_VISIBLE_DEVICES by index keeps the engine GPU and warns about CUDA ordering', async () => {
    const facts = await queryGpuFacts({ executable: NVIDIA_SMI, env: TWO, visibleDevices: '1' })
    expect(facts).toMatchObject({ status: 'ok', gpus: [{ index: 1, uuid: UUID1 }], visibleDevices: '1' })
    expect(facts.status === 'ok' && facts.note).toMatch(/CUDA_DEVICE_ORDER=PCI_BUS_ID/)
  })

  test('CUDA_VISIBLE_DEVICES is read from the env passed when not given explicitly', async () => {
    const facts = await queryGpuFacts({
      executable: NVIDIA_SMI,
      env: { ...TWO, CUDA_VISIBLE_DEVICES: '1', CUDA_DEVICE_ORDER: 'PCI_BUS_ID' },
    })
    expect(facts).toEqual({ status: 'ok', gpus: [{ index: 1, uuid: UUID1, ...H100 }], visibleDevices: '1', note: null })
  })

  test('CUDA_VISIBLE_DEVICES by UUID and by unique UUID prefix, in the given order', async () => {
    const facts = await queryGpuFacts({ executable: NVIDIA_SMI, env: TWO, visibleDevices: `GPU-a1b2,${UUID0}` })
    expect(facts).toMatchObject({ status: 'ok', gpus: [{ index: 1 }, { index: 0 }], note: null })
  })

  test('CUDA reads the list up to the first entry that names no device', () => {
    const gpus = parseGpuFacts(`0, A, ${UUID0}, 1, 1\n1, B, ${UUID1}, 1, 1\n2, C, GPU-ffff, 1, 1\n`).gpus
    expect(selectVisibleGpus(gpus, '1,7,0', 'PCI_BUS_ID')).toMatchObject({ status: 'ok', gpus: [{ index: 1 }] })
    expect(selectVisibleGpus(gpus, '0,0,2', 'PCI_BUS_ID')).toMatchObject({ status: 'ok', gpus: [{ index: 0 }, { index: 2 }] })
  })

  test.each([
    ['', 'CUDA_VISIBLE_DEVICES is empty: the engine sees no GPU'],
    ['7', 'CUDA_VISIBLE_DEVICES="7" names none of the GPUs nvidia-smi lists (indices 0, 1)'],
    ['-1', 'CUDA_VISIBLE_DEVICES="-1" names none of the GPUs nvidia-smi lists (indices 0, 1)'],
    ['GPU-', 'CUDA_VISIBLE_DEVICES="GPU-" names none of the GPUs nvidia-smi lists (indices 0, 1)'],
  ])('CUDA_VISIBLE_DEVICES=%j: absent with the reason', async (visibleDevices, reason) => {
    expect(await queryGpuFacts({ executable: NVIDIA_SMI, env: TWO, visibleDevices })).toEqual({ status: 'absent', reason })
  })

  test('a MIG instance cannot be measured with --query-gpu', async () => {
    const facts = await queryGpuFacts({ executable: NVIDIA_SMI, visibleDevices: 'MIG-4f2c5d1e-0b7a-5c3d-9e8f-1a2b3c4d5e6f' })
    expect(facts).toEqual({ status: 'absent', reason: expect.stringContaining('names a MIG instance') })
  })

  test('a MIG-enabled GPU chosen by index: no whole-GPU figures, the limitation recorded', async () => {
    const mig = { ...TWO, FAKE_NVIDIA_SMI_MIG: '1' }
    const facts = await queryGpuFacts({ executable: NVIDIA_SMI, env: mig, visibleDevices: '1' })
    expect(facts).toEqual({
      status: 'absent',
      reason:
        "GPU 1 (NVIDIA H100 80GB HBM3) has MIG mode enabled: nvidia-smi --query-gpu reports the whole GPU's power, memory and " +
        'utilization, not the MIG instance the engine runs on, so no GPU figures are recorded; run on a GPU without MIG to measure them',
    })
    // The other GPU is not in MIG mode: measured as before.
    expect(await queryGpuFacts({ executable: NVIDIA_SMI, env: mig, visibleDevices: '0' })).toMatchObject({ status: 'ok' })
    // No CUDA_VISIBLE_DEVICES: the engine may land on the MIG GPU, so none is measured.
    expect(await queryGpuFacts({ executable: NVIDIA_SMI, env: mig, visibleDevices: null })).toMatchObject({ status: 'absent' })
    // The sampler starts from the same facts: nothing sampled.
    const sampler = startGpuSampler({ executable: NVIDIA_SMI, env: mig, visibleDevices: '1', intervalMs: 20 })
    expect(await sampler.stop()).toMatchObject({ status: 'absent', reason: expect.stringMatching(/MIG mode enabled/) })
  })

  test('MIG mode parsed from its own query; [N/A] (GPUs without MIG) is not enabled', () => {
    expect(parseMigEnabled('0, Disabled\n1, Enabled\n2, [N/A]\n')).toEqual(new Set([1]))
  })

  test('no nvidia-smi on PATH: absent, ENOENT', async () => {
    expect(await queryGpuFacts({ executable: '/nonexistent/nvidia-smi' })).toEqual({
      status: 'absent',
      reason: '/nonexistent/nvidia-smi not found (ENOENT): no NVIDIA driver tools on this host',
    })
  })

  test('driver not loaded: absent with the real message and exit code', async () => {
    expect(await queryGpuFacts({ executable: fake('nvidia-smi-broken') })).toEqual({
      status: 'absent',
      reason:
        `${fake('nvidia-smi-broken')} exited with code 9: ` +
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. " +
        'Make sure that the latest NVIDIA driver is installed and running.',
    })
  })

  test('prints nothing: absent', async () => {
    expect(await queryGpuFacts({ executable: '/bin/true' })).toEqual({
      status: 'absent',
      reason: '/bin/true printed nothing (no GPU visible to the driver)',
    })
  })
})

/** Resolves once the fake has been called `n` times in all (it logs each call). */
async function calls(log: string, n: number): Promise<void> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const count = await readFile(log, 'utf8').then(
      (t) => t.split('\n').length - 1,
      () => 0,
    )
    if (count >= n) return
    if (Date.now() > deadline) throw new Error(`the fake nvidia-smi was called ${count} times, expected ${n}`)
    await sleep(10)
  }
}

/**
 * Runs a sampler over an idle baseline, a load phase (the fake's load file in `dir` present) and a drain,
 * paced by the polls the fake saw rather than by the clock (CI machines are slow and shared).
 */
async function sampleCell(dir: string, executable: string, env: Record<string, string>, intervalMs = 40) {
  const loadFile = join(dir, 'load')
  const log = join(dir, 'calls')
  const sampler = startGpuSampler({
    executable,
    intervalMs,
    visibleDevices: null,
    env: { ...env, FAKE_NVIDIA_SMI_LOAD_FILE: loadFile, FAKE_NVIDIA_SMI_CALL_LOG: log },
  })
  // The facts and MIG queries + 3 polls started: at least 2 baseline samples are in.
  await calls(log, 5)
  const loadStartedAt = await sampler.markLoadStart()
  await writeFile(loadFile, '')
  // Polls are sequential: when the 4th poll after the load file starts, 3 loaded ones are in.
  const before = (await readFile(log, 'utf8')).split('\n').length - 1
  await calls(log, before + 4)
  const loadEndedAt = Date.now()
  await rm(loadFile)
  const samples = await sampler.stop()
  return { samples, loadStartedAt, loadEndedAt }
}

describe('startGpuSampler against the fake nvidia-smi', () => {
  test('idle baseline, then load: power and memory rise; summary per device and worst device', async ({ testDir }) => {
    const { samples, loadStartedAt, loadEndedAt } = await sampleCell(testDir, NVIDIA_SMI, TWO)
    expect(samples.status).toBe('ok')
    if (samples.status !== 'ok') return
    expect(samples).toMatchObject({ intervalMs: 40, devices: [0, 1], loadStartedAt, pollErrors: 0, lastPollError: null })
    expect(samples.polls).toBeGreaterThanOrEqual(8)
    const powers0 = new Set(samples.samples.filter((s) => s.index === 0).map((s) => s.powerW))
    expect(powers0).toEqual(new Set([71.23, 612.48]))
    // The last poll comes after stop(): the load window's end is covered.
    expect(Math.max(...samples.samples.map((s) => s.timestampMs))).toBeGreaterThan(loadEndedAt)

    const summary = summarizeGpu(samples, { outputTokens: 1000, loadStartedAt, loadEndedAt })
    expect(summary.status).toBe('ok')
    if (summary.status !== 'ok') return
    const [d0, d1] = summary.devices
    // Samples before the mark were taken before the load file existed: pure idle. In the window at
    // most one idle sample (a poll in flight at the mark) sits among ≥ 3 loaded ones: p95 is the load.
    expect(d0).toMatchObject({
      index: 0,
      idlePowerW: 71.23,
      peakMemoryUsedMiB: 71234,
      peakProcessVramEstimateMiB: 71234 - 534,
      activePowerP95W: 612.48,
      temperatureP95C: 64,
    })
    expect(d1).toMatchObject({
      index: 1,
      idlePowerW: 69.87,
      peakMemoryUsedMiB: 70111,
      peakProcessVramEstimateMiB: 70111 - 534,
      activePowerP95W: 598.02,
      temperatureP95C: 61,
    })
    expect(d0?.energyJ).toBeGreaterThan(0)
    expect(d0?.idleSubtractedJPerOutputToken).toBeGreaterThan(0)
    expect(d0?.reasons).toEqual({})
    // The worst single device, never a sum of the two.
    expect(summary.worst.peakMemoryUsedMiB).toEqual({ value: 71234, deviceIndex: 0, reason: null })
    expect(summary.worst.idlePowerW).toEqual({ value: 71.23, deviceIndex: 0, reason: null })
    expect(summary.worst.energyJ.value).toBe(Math.max(d0?.energyJ ?? 0, d1?.energyJ ?? 0))
  })

  test('power reported as [N/A]: memory still measured, every power figure null with the reason', async ({ testDir }) => {
    const { samples, loadStartedAt, loadEndedAt } = await sampleCell(testDir, fake('nvidia-smi-power-na'), {})
    const summary = summarizeGpu(samples, { outputTokens: 1000, loadStartedAt, loadEndedAt })
    expect(summary.status).toBe('ok')
    if (summary.status !== 'ok') return
    const noPower = 'nvidia-smi reported no power draw for this GPU ([N/A] or [Not Supported])'
    expect(summary.devices[0]).toMatchObject({
      idlePowerW: null,
      activePowerMeanW: null,
      activePowerP95W: null,
      energyJ: null,
      idleSubtractedEnergyJ: null,
      idleSubtractedJPerOutputToken: null,
      peakMemoryUsedMiB: 71234,
      reasons: {
        idlePowerW: noPower,
        activePowerMeanW: noPower,
        activePowerP95W: noPower,
        energyJ: noPower,
        idleSubtractedEnergyJ: `no energy: ${noPower}`,
        idleSubtractedJPerOutputToken: `no energy: ${noPower}`,
      },
    })
    expect(summary.worst.energyJ).toEqual({ value: null, deviceIndex: null, reason: noPower })
  })

  test('a load that starts before the first poll returns still gets an idle baseline', async ({ testDir: dir }) => {
    const loadFile = join(dir, 'load')
    const sampler = startGpuSampler({
      executable: NVIDIA_SMI,
      intervalMs: 40,
      visibleDevices: null,
      env: { ...TWO, FAKE_NVIDIA_SMI_LOAD_FILE: loadFile },
    })
    // Marked at once: the polling loop's first call is still running, so the mark takes one itself.
    const loadStartedAt = await sampler.markLoadStart()
    await writeFile(loadFile, '')
    const samples = await sampler.stop()
    await rm(loadFile)
    const summary = summarizeGpu(samples, { outputTokens: 10, loadStartedAt, loadEndedAt: Date.now() })
    expect(summary.status).toBe('ok')
    if (summary.status === 'ok') {
      expect(summary.devices[0]).toMatchObject({ idlePowerW: 71.23, activePowerP95W: 612.48 })
      expect(summary.devices[0]?.reasons.idlePowerW).toBeUndefined()
    }
  })

  test('no driver: stop() returns absent with the reason', async () => {
    const sampler = startGpuSampler({ executable: fake('nvidia-smi-broken'), intervalMs: 50 })
    await sampler.markLoadStart()
    const samples = await sampler.stop()
    expect(samples).toEqual({ status: 'absent', reason: expect.stringContaining('exited with code 9: NVIDIA-SMI has failed') })
    expect(summarizeGpu(samples, { outputTokens: 1, loadStartedAt: 0, loadEndedAt: 1 })).toEqual(samples)
  })

  test('an abort signal stops polling; stop() is idempotent', async ({ testDir: dir }) => {
    const log = join(dir, 'calls')
    const controller = new AbortController()
    const sampler = startGpuSampler({
      executable: NVIDIA_SMI,
      intervalMs: 40,
      visibleDevices: null,
      signal: controller.signal,
      env: { FAKE_NVIDIA_SMI_CALL_LOG: log },
    })
    await calls(log, 3)
    controller.abort()
    const first = await sampler.stop()
    expect(await sampler.stop()).toBe(first)
    expect(first.status === 'ok' && first.samples.length).toBeGreaterThan(0)
  })

  test('rejects a non-positive interval', () => {
    expect(() => startGpuSampler({ intervalMs: 0 })).toThrow(RangeError)
  })
})
