import { describe, expect, test } from 'vitest'
import { bodyExtras } from './body.ts'
import { canaryMarker, checkCanary, withoutMarkers } from './canary.ts'
import { calibrationTolerance, fitPieces, prepareWorkload } from './prepare.ts'
import { codeSource, proseSource } from './text.ts'

describe('fitPieces', () => {
  test('finds the exact size on a monotone count with a few calls', async () => {
    let calls = 0
    // 1.37 tokens per piece plus a 20-token template: not one-to-one, like a real tokenizer.
    const count = async (pieces: number) => {
      calls++
      return 20 + Math.round(pieces * 1.37)
    }
    const fit = await fitPieces(count, 4096, 100)
    expect(fit.tokens).toBe(4096)
    expect(calls).toBeLessThanOrEqual(6)
  })

  test('returns the closest reachable size when exact is impossible (steps of 3 tokens)', async () => {
    const fit = await fitPieces(async (p) => 3 * p, 100, 10)
    expect(Math.abs(fit.tokens - 100)).toBe(1)
  })
})

test('the tolerance is ±0.5% or ±8 tokens, whichever is larger', () => {
  expect(calibrationTolerance(100)).toBe(8)
  expect(calibrationTolerance(1600)).toBe(8)
  expect(calibrationTolerance(10_240)).toBe(52)
})

describe('text sources', () => {
  test('are deterministic and prefix-stable: n pieces are the first n of a longer take', () => {
    const long = proseSource(3, 1).take(200).split(' ')
    expect(proseSource(3, 1).take(57).split(' ')).toEqual(long.slice(0, 57))
    expect(proseSource(3, 2).take(57)).not.toBe(proseSource(3, 1).take(57))
    const code = codeSource(3, 1).take(80)
    expect(code.split(/\s+/).filter(Boolean)).toHaveLength(80)
    expect(codeSource(3, 1).take(80)).toBe(code)
    expect(code).toMatch(/^def step_1\(/)
  })
})

describe('canaries', () => {
  const marker = canaryMarker(17, 3)
  test.each([
    ['SGREQ-17-00003 Sure, here it is.', true, true, null],
    ['  \nSGREQ-17-00003 ok', true, true, null],
    ['Sure. SGREQ-17-00003', true, false, 'the reply does not start with its marker SGREQ-17-00003'],
    ['SGREQ-17-00003 and SGREQ-17-00004', true, false, "the reply contains another request's marker (SGREQ-17-00004)"],
    ['SGREQ-17-00003 fine', false, false, 'the reply exceeded the capture bound, so it cannot be checked (fails closed)'],
  ])('%j (capture complete: %s) → passed %s', (content, complete, passed, reason) => {
    expect(checkCanary(marker, content, complete)).toMatchObject({ passed, reason })
  })

  test('markers are removed before scoring, so their digits never read as an answer', () => {
    expect(withoutMarkers('SGREQ-17-00003 The answer is 42.')).toBe('  The answer is 42.')
  })
})

describe('bodyExtras', () => {
  test('output control knobs', () => {
    expect(bodyExtras('chat', 64, {}, { mode: 'strict', knob: 'min_tokens' }).fields).toEqual({ min_tokens: 64 })
    expect(bodyExtras('chat', 64, {}, { mode: 'observe', knob: 'ignore_eos' }).fields).toEqual({ ignore_eos: true })
    expect(bodyExtras('chat', 64, {}, { mode: 'none', knob: 'ignore_eos' })).toMatchObject({ fields: {}, outputKnobField: null })
  })

  test('unset sampling parameters are not sent and record the engine default as unknown', () => {
    expect(bodyExtras('chat', 8, {}, { mode: 'none', knob: 'ignore_eos' }).sampling.temperature).toEqual({
      requested: null,
      sent: false,
      field: null,
      effective: null,
      note: null,
    })
  })
})

describe('prepareWorkload', () => {
  const plan = { api: 'chat' as const, maxTokens: 16, requests: 3, warmupRequests: 2 }

  test('the same plan gives byte-identical bodies; warm-ups get their own prompts', async () => {
    const a = await prepareWorkload({ promptTokens: 200, seed: 9, canaries: true }, plan, null)
    const b = await prepareWorkload({ promptTokens: 200, seed: 9, canaries: true }, plan, null)
    expect(a.measured.map((r) => r.body)).toEqual(b.measured.map((r) => r.body))
    expect(a.requestStreamSha256).toBe(b.requestStreamSha256)
    expect(a.warmup).toHaveLength(2)
    expect(new Set([...a.measured, ...a.warmup].map((r) => r.body)).size).toBe(5)
    expect(a.measured[1]?.canaryMarker).toBe('SGREQ-9-00001')
    expect(JSON.parse(a.measured[1]?.body as string).messages[0].content).toMatch(/^Request 9-1\.\n\n/)
    expect(a.calibration).toMatchObject({ method: 'estimate', warning: 'no tokenizer was probed; prompt sizes are estimated' })
  })

  test('bad workload fields are named', async () => {
    await expect(prepareWorkload({ promptTokens: 4 }, plan, null)).rejects.toThrow(/workload\.promptTokens/)
    await expect(prepareWorkload({ kind: 'dataset' }, plan, null)).rejects.toThrow(
      'workload.datasetPath: the dataset kind needs a JSONL file; pass --dataset FILE',
    )
    await expect(prepareWorkload({ promptTokens: 100, prefixCache: { mode: 'shared', tokens: 100 } }, plan, null)).rejects.toThrow(
      /workload\.prefixCache\.tokens/,
    )
  })

  test('a shared prefix is byte-identical across requests; the rest differs', async () => {
    const w = await prepareWorkload({ kind: 'shared-prefix', promptTokens: 300, prefixCache: { mode: 'shared', tokens: 150 } }, plan, null)
    const contents = w.measured.map((r) => JSON.parse(r.body).messages[0].content as string)
    const shared = (contents[0] as string).split('\n\n')[0] as string
    expect(shared.split(' ').length).toBeGreaterThan(80)
    for (const c of contents) expect(c.startsWith(`${shared}\n\nRequest `)).toBe(true)
    expect(new Set(contents).size).toBe(3)
  })
})
