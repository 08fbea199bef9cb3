import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, test } from 'vitest'
import type { RunRecord } from '../schema/run.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { type ParsedRow, parseDataset } from '../workload/dataset.ts'
import { scoreResponse } from '../workload/score.ts'
import { WORKLOAD_KINDS, type WorkloadSpec } from '../workload/workload-spec.ts'
import { runCell } from './measure-cell.ts'

const ARITHMETIC = fileURLToPath(new URL('../../fixtures/datasets/arithmetic.jsonl', import.meta.url))
const CHARTS = fileURLToPath(new URL('../../fixtures/datasets/charts.jsonl', import.meta.url))

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

async function sim(options: SimOptions = {}): Promise<SimServer> {
  const s = await startSimServer({ model: 'm', prefillTokPerS: 200_000, decodeTokPerS: 2000, ...options })
  servers.push(s)
  return s
}

/** Each test gets its own seed so the once-per-plan calibration cache never crosses tests. */
let seed = 1000
const nextSeed = () => seed++

function okRequests(record: RunRecord) {
  return record.requests.filter((r) => r.status === 'ok')
}

describe('both arms receive identical bytes', () => {
  // Conversations: src/runner/conversation.test.ts.
  test.each(WORKLOAD_KINDS.filter((k) => k !== 'conversation'))(
    '%s: same planned and wire hashes on two engines serving different model names',
    async (kind) => {
      const a = await sim({ model: 'baseline-model' })
      const b = await sim({ model: 'candidate-model' })
      const workload: WorkloadSpec = {
        kind,
        promptTokens: 120,
        seed: nextSeed(),
        ...(kind === 'dataset' ? { datasetPath: ARITHMETIC } : {}),
      }
      // The usage cross-check's tokenizer calls are left out: only the calibration's are counted here.
      const cell = { requests: 6, concurrency: 2, maxTokens: 8, workload, usageCheck: { retokenize: false } }
      const ra = await runCell({ baseUrl: a.url, model: 'baseline-model', ...cell })
      const rb = await runCell({ baseUrl: b.url, model: 'candidate-model', ...cell })
      expect(ra.completed).toBe(6)
      expect(rb.completed).toBe(6)
      const wa = ra.plan.workload
      const wb = rb.plan.workload
      expect(wa.kind).toBe(kind)
      expect(wa.requestStreamSha256).toMatch(/^[0-9a-f]{64}$/)
      expect(wb.requestStreamSha256).toBe(wa.requestStreamSha256)
      expect(wa.wireStreamSha256).toBe(wa.requestStreamSha256)
      expect(wb.wireStreamSha256).toBe(wa.requestStreamSha256)
      expect([wa.wireMatchesPlan, wb.wireMatchesPlan]).toEqual([true, true])
      // Calibrated once per plan: the second arm reused the first arm's bytes without tokenizing.
      expect(b.stats().tokenizeRequests).toBe(0)
      expect(rb.requests.map((r) => r.promptTokens)).toEqual(ra.requests.map((r) => r.promptTokens))
    },
  )

  test('another seed, another stream; the kinds differ from each other', async () => {
    const s = await sim()
    const hashes = new Set<string | null>()
    for (const kind of ['synthetic-summary', 'synthetic-repeated-code', 'shared-prefix'] as const) {
      const r = await runCell({ baseUrl: s.url, model: 'm', requests: 2, maxTokens: 2, workload: { kind, promptTokens: 64, seed: 7 } })
      hashes.add(r.plan.workload.requestStreamSha256)
    }
    const other = await runCell({ baseUrl: s.url, model: 'm', requests: 2, maxTokens: 2, workload: { promptTokens: 64, seed: 8 } })
    hashes.add(other.plan.workload.requestStreamSha256)
    expect(hashes.size).toBe(4)
  })
})

describe('context calibration with the engine tokenizer', () => {
  test.each([
    ['chat', 'synthetic-summary', 64],
    ['chat', 'synthetic-summary', 1500],
    ['completions', 'synthetic-summary', 700],
    ['chat', 'synthetic-repeated-code', 2000],
    ['chat', 'shared-prefix', 900],
  ] as const)('%s %s %i tokens: every prompt within ±0.5%% or ±8 tokens by the engine’s own count', async (api, kind, promptTokens) => {
    const s = await sim()
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      api,
      requests: 5,
      maxTokens: 2,
      workload: { kind, promptTokens, seed: nextSeed() },
    })
    const tolerance = Math.max(8, Math.ceil(promptTokens * 0.005))
    expect(r.plan.workload.calibration).toMatchObject({
      method: 'engine-tokenizer',
      toleranceTokens: tolerance,
      outsideTolerance: 0,
      warning: null,
    })
    for (const req of r.requests) {
      expect(Math.abs((req.promptTokens as number) - promptTokens)).toBeLessThanOrEqual(tolerance)
      expect(req.plannedPromptTokens).toBe(req.promptTokens)
    }
  })

  test('an engine without /tokenize: sizes are estimated, the record says so, usage is still recorded', async () => {
    const s = await sim({ noTokenize: true })
    const r = await runCell({ baseUrl: s.url, model: 'm', requests: 3, maxTokens: 2, workload: { promptTokens: 300, seed: nextSeed() } })
    expect(r.plan.workload.calibration?.method).toBe('estimate')
    expect(r.plan.workload.calibration?.warning).toMatch(/no usable POST \/tokenize; prompt sizes are estimated/)
    expect(r.plan.workload.promptTokensEstimator).toMatch(/estimated/)
    for (const req of r.requests) {
      expect(req.plannedPromptTokens).toBeNull()
      expect(req.promptTokens).toBeGreaterThan(0)
    }
  })

  test('shared-prefix: every prompt begins with the same calibrated block; unique prompts share no first line', async () => {
    const s = await sim()
    const shared = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 4,
      maxTokens: 2,
      workload: { kind: 'shared-prefix', promptTokens: 400, seed: nextSeed(), prefixCache: { mode: 'shared', tokens: 200 } },
    })
    expect(shared.plan.workload.prefixCache.mode).toBe('shared')
    expect(Math.abs((shared.plan.workload.prefixCache.tokens as number) - 200)).toBeLessThanOrEqual(8)
    const unique = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 4,
      maxTokens: 2,
      workload: { promptTokens: 400, seed: nextSeed() },
    })
    expect(unique.plan.workload.prefixCache).toEqual({ mode: 'unique', tokens: null })
  })
})

describe('request canaries', () => {
  test('every reply starts with its own marker: all pass', async () => {
    const s = await sim()
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 6,
      concurrency: 3,
      maxTokens: 6,
      workload: { canaries: true, promptTokens: 64, seed: nextSeed() },
    })
    expect(r.completed).toBe(6)
    expect(r.metrics.canaries).toEqual({ samples: 6, passed: 6 })
    expect(r.requests[2]?.canary).toMatchObject({
      marker: `SGREQ-${r.plan.workload.seed}-00002`,
      atStart: true,
      foreignMarkers: [],
      passed: true,
    })
  })

  test('an engine that crosses streams is caught: the reply with another request’s marker is contract-invalid and excluded', async () => {
    const s = await sim({ faults: [{ kind: 'cross', requests: [2] }] })
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 5,
      maxTokens: 6,
      workload: { canaries: true, promptTokens: 64, seed: nextSeed() },
    })
    const crossed = r.requests[2]
    expect(crossed?.status).toBe('failed')
    expect(crossed?.status === 'failed' && crossed.error).toMatchObject({ code: 'CONTRACT_INVALID' })
    expect(crossed?.status === 'failed' && crossed.error.message).toMatch(/another request's marker \(SGREQ-\d+-00003\)/)
    expect(r.failures).toEqual({ CONTRACT_INVALID: 1 })
    expect(r.metrics.canaries).toEqual({ samples: 5, passed: 4 })
    expect(r.metrics.distributions.ttftMs.samples).toBe(4)
  })

  test('a reply longer than the capture bound fails closed', async () => {
    const s = await sim()
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 1,
      maxTokens: 200,
      workload: { canaries: true, captureChars: 256, promptTokens: 64, seed: nextSeed() },
    })
    expect(r.requests[0]?.canary).toMatchObject({ captureComplete: false, passed: false })
    expect(r.failures).toEqual({ CONTRACT_INVALID: 1 })
  })
})

describe('controlled output length', () => {
  test('observe records adherence; the knob is in the body and the record', async () => {
    const s = await sim({ outputTokens: 3 })
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 3,
      maxTokens: 12,
      workload: { outputControl: { mode: 'observe', knob: 'min_tokens' }, promptTokens: 64, seed: nextSeed() },
    })
    expect(r.plan.workload.outputControl).toEqual({ mode: 'observe', knob: 'min_tokens' })
    expect(r.metrics.outputControl).toEqual({ samples: 3, exact: 3, rate: 1, unobservable: 0 })
    expect(r.requests.every((q) => q.completionTokens === 12)).toBe(true)
  })

  test('observe on an engine that ignores the knob: inexact, recorded, still measured', async () => {
    const s = await sim({ outputTokens: 3, ignoreOutputKnobs: true })
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 3,
      maxTokens: 12,
      workload: { outputControl: { mode: 'observe' }, promptTokens: 64, seed: nextSeed() },
    })
    expect(r.completed).toBe(3)
    expect(r.metrics.outputControl).toEqual({ samples: 3, exact: 0, rate: 0, unobservable: 0 })
    expect(r.requests.map((q) => q.outputAdherence)).toEqual(['inexact', 'inexact', 'inexact'])
  })

  test('strict on the same engine: every non-exact completion is contract-invalid with the reason', async () => {
    const s = await sim({ outputTokens: 3, ignoreOutputKnobs: true })
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 3,
      maxTokens: 12,
      workload: { outputControl: { mode: 'strict' }, promptTokens: 64, seed: nextSeed() },
    })
    expect(r.failures).toEqual({ CONTRACT_INVALID: 3 })
    const first = r.requests[0]
    expect(first?.status === 'failed' && first.error.message).toBe('output control strict: 3 completion tokens, expected exactly 12')
    expect(r.metrics.distributions.e2eMs.samples).toBe(0)
  })
})

describe('sampling parameters', () => {
  test('are sent identically and recorded as requested, sent and effective', async () => {
    const s = await sim()
    const sampling = { temperature: 0.6, topP: 0.95, seed: 3, reasoningEffort: 'low', thinking: 'disabled' } as const
    const chat = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 1,
      maxTokens: 2,
      workload: { sampling, promptTokens: 32, seed: nextSeed() },
    })
    expect(chat.plan.workload.sampling).toEqual({
      temperature: { requested: 0.6, sent: true, field: 'temperature', effective: 0.6, note: null },
      topP: { requested: 0.95, sent: true, field: 'top_p', effective: 0.95, note: null },
      seed: { requested: 3, sent: true, field: 'seed', effective: 3, note: null },
      reasoningEffort: { requested: 'low', sent: true, field: 'reasoning_effort', effective: 'low', note: null },
      thinking: { requested: 'disabled', sent: true, field: 'chat_template_kwargs.enable_thinking', effective: false, note: null },
    })
    const completions = await runCell({
      baseUrl: s.url,
      model: 'm',
      api: 'completions',
      requests: 1,
      maxTokens: 2,
      workload: { sampling, promptTokens: 32, seed: nextSeed() },
    })
    expect(completions.plan.workload.sampling?.thinking).toMatchObject({
      requested: 'disabled',
      sent: false,
      field: null,
      effective: null,
      note: expect.stringMatching(/not sent/),
    })
    expect(completions.plan.workload.sampling?.temperature?.sent).toBe(true)
  })
})

describe('scored datasets', () => {
  test('arithmetic rows are scored from the content; accuracy carries a Wilson interval', async () => {
    const s = await sim({ reasoningTokens: 4 })
    const lines = (await readFile(ARITHMETIC, 'utf8')).trim().split('\n')
    const rows = lines.length
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: rows,
      concurrency: 3,
      maxTokens: 12,
      workload: { kind: 'dataset', datasetPath: ARITHMETIC, canaries: true, seed: nextSeed() },
    })
    expect(r.completed).toBe(rows)
    expect(r.plan.workload.dataset).toMatchObject({ rows, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) })
    const accuracy = r.metrics.accuracy
    expect(accuracy?.samples).toBe(rows)
    // The sim answers "What is A op B?" correctly (after the canary marker and reasoning); each
    // such row must score correct, which needs the marker's digits kept out of the answer.
    const simAnswers = lines.map((line) => /What is -?\d+ [+×*x-] -?\d+\?/.test(line))
    expect(simAnswers.filter(Boolean).length).toBeGreaterThanOrEqual(15)
    okRequests(r).forEach((q) => {
      if (simAnswers[q.index]) expect(q.score, `row ${q.index}`).toMatchObject({ correct: true })
    })
    expect(accuracy?.correct).toBeGreaterThanOrEqual(simAnswers.filter(Boolean).length)
    // The text each reply was scored on is kept (its canary marker removed), so it can be judged again.
    const datasetRows = parseDataset(lines.join('\n'), ARITHMETIC)
    okRequests(r).forEach((q) => {
      expect(q.outputText, `row ${q.index}`).toEqual(expect.any(String))
      expect(q.outputText).not.toMatch(/SGREQ-/)
      expect(scoreResponse(datasetRows[q.index] as ParsedRow, q.outputText as string)).toEqual(q.score)
    })
    expect(accuracy?.wilson95Low).toBeLessThan(accuracy?.rate as number)
    expect(accuracy?.wilson95High).toBeGreaterThan(accuracy?.rate as number)
  })

  test('chart rows are sent as image_url data-URI parts, and the request-stream hash covers the image bytes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'servegate-charts-'))
    try {
      const s = await sim()
      const plan = { baseUrl: s.url, model: 'm', requests: 2, maxTokens: 4 }
      const original = await runCell({ ...plan, workload: { kind: 'dataset', datasetPath: CHARTS, seed: 41 } })
      // Same rows, one pixel of one image changed: the hash must change.
      const chartsDir = fileURLToPath(new URL('../../fixtures/datasets/', import.meta.url))
      const text = await readFile(CHARTS, 'utf8')
      await writeFile(join(dir, 'charts.jsonl'), text)
      const images = [...new Set([...text.matchAll(/"(charts\/[^"]+\.png)"/g)].map((m) => m[1] as string))]
      await import('node:fs/promises').then((fs) => fs.mkdir(join(dir, 'charts')))
      for (const image of images) await copyFile(join(chartsDir, image), join(dir, image))
      const first = join(dir, images[0] as string)
      const bytes = await readFile(first)
      bytes[bytes.length - 20] = (bytes[bytes.length - 20] as number) ^ 0xff
      await writeFile(first, bytes)
      const changed = await runCell({ ...plan, workload: { kind: 'dataset', datasetPath: join(dir, 'charts.jsonl'), seed: 41 } })
      expect(original.plan.workload.requestStreamSha256).not.toBe(changed.plan.workload.requestStreamSha256)
      expect(original.completed).toBe(2)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('the requests-per-slot floor', () => {
  test('is declared, and a cell below it is flagged', async () => {
    const s = await sim()
    const below = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 4,
      concurrency: 2,
      maxTokens: 2,
      workload: { promptTokens: 32, seed: nextSeed() },
    })
    expect(below.plan.workload).toMatchObject({ requestsPerSlotFloor: 4, floorMet: false })
    // Nothing is scored on a synthetic workload, so no reply text is kept.
    expect(below.requests.map((q) => q.outputText)).toEqual([null, null, null, null])
    const met = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 8,
      concurrency: 2,
      maxTokens: 2,
      workload: { promptTokens: 32, seed: nextSeed() },
    })
    expect(met.plan.workload.floorMet).toBe(true)
  })
})
