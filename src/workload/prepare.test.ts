import { createHash } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { bodyExtras } from './body.ts'
import { canaryMarker, checkCanary, withoutMarkers } from './canary.ts'
import type { TokenizerProbe } from '../client/tokenize.ts'
import { requestStreamSha256 } from './bytes.ts'
import { calibrationTolerance, fitPieces, type PreparedRequest, type PreparedWorkload, prepareWorkload, streamSha256 } from './prepare.ts'
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

/** Requests `from` … `to` − 1, built. */
function built(w: PreparedWorkload, from = 0, to = w.measuredCount): PreparedRequest[] {
  return Array.from({ length: to - from }, (_, i) => w.request(from + i))
}

describe('prepareWorkload', () => {
  const plan = { api: 'chat' as const, maxTokens: 16, requests: 3, warmupRequests: 2 }

  test('the same plan gives byte-identical bodies; warm-ups get their own prompts', async () => {
    const a = await prepareWorkload({ promptTokens: 200, seed: 9, canaries: true }, plan, null)
    const b = await prepareWorkload({ promptTokens: 200, seed: 9, canaries: true }, plan, null)
    expect(built(a).map((r) => r.body)).toEqual(built(b).map((r) => r.body))
    expect(streamSha256(a)).toBe(streamSha256(b))
    expect(a.warmupCount).toBe(2)
    expect(new Set(built(a, 0, 5).map((r) => r.body)).size).toBe(5)
    expect(a.request(1).canaryMarker).toBe('SGREQ-9-00001')
    expect(JSON.parse(a.request(1).body).messages[0].content).toMatch(/^Request 9-1\.\n\n/)
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
    const contents = built(w).map((r) => JSON.parse(r.body).messages[0].content as string)
    const shared = (contents[0] as string).split('\n\n')[0] as string
    expect(shared.split(' ').length).toBeGreaterThan(80)
    for (const c of contents) expect(c.startsWith(`${shared}\n\nRequest `)).toBe(true)
    expect(new Set(contents).size).toBe(3)
  })
})

describe('bodies built on demand', () => {
  // A tokenizer that counts words: deterministic, so calibration fits every request the same way.
  const words: TokenizerProbe = {
    warning: null,
    tokenizer: {
      description: 'words',
      countText: async (t) => Math.round(t.split(/\s+/).length * 1.21) + 3,
      countChat: async (m) => Math.round((m[0]?.content ?? '').split(/\s+/).length * 1.21) + 9,
    },
  }
  // Hashes of the bodies as eager preparation (every body built up front) gave them, over each
  // body's length and bytes: the pin is on the bodies themselves, whatever the stream hash's construction.
  const bytesSha = (bodies: readonly string[]): string => {
    const hash = createHash('sha256')
    for (const body of bodies) hash.update(`${Buffer.byteLength(body)}\n`).update(body)
    return hash.digest('hex')
  }
  test.each([
    [
      'estimated, canaries, shared prefix',
      { promptTokens: 200, seed: 9, canaries: true, prefixCache: { mode: 'shared' as const, tokens: 60 } },
      { api: 'chat' as const, maxTokens: 16, requests: 40, warmupRequests: 3 },
      null,
      'ce65fbec2a17494868fbc24c8d3fe4371f8e8bb79f075f6df149076236e792e3',
      '616e4220db1578a8bc5b41883b5552ea46f34cb3ec4bab81afd19a53c42d39a9',
    ],
    [
      'a trace sizes each request',
      { kind: 'synthetic-repeated-code' as const, promptTokens: 120, seed: 4 },
      {
        api: 'completions' as const,
        maxTokens: 8,
        requests: 25,
        warmupRequests: 0,
        sizes: Array.from({ length: 25 }, (_, i) => ({ promptTokens: 60 + 7 * i, maxTokens: 4 + (i % 3) })),
      },
      null,
      '3d9f4cab38366fa632b3412c109b519f25910e2a26c2c2e3212991eb33f5a8f7',
      '3d9f4cab38366fa632b3412c109b519f25910e2a26c2c2e3212991eb33f5a8f7',
    ],
    [
      'calibrated with a tokenizer',
      { promptTokens: 150, seed: 5, canaries: true },
      { api: 'chat' as const, maxTokens: 12, requests: 30, warmupRequests: 2 },
      words,
      'c88f837409b26c375a92bd17d959f80b63e03469aecc22dd3ff85953b494e936',
      '53431ae634493045c64829b36ac6a8a3e17a00d0ea34745ba68108321b917c3b',
    ],
  ])('%s: the same stream hash as eager preparation', async (_, spec, plan, probe, measuredSha, allSha) => {
    const w = await prepareWorkload(spec, plan, probe)
    const total = w.measuredCount + w.warmupCount
    expect(bytesSha(built(w, 0, w.measuredCount).map((r) => r.body))).toBe(measuredSha)
    expect(bytesSha(built(w, 0, total).map((r) => r.body))).toBe(allSha)
    expect(streamSha256(w)).toBe(requestStreamSha256(built(w, 0, w.measuredCount).map((r) => r.body)))
    // Built again, out of order: the same bytes.
    expect(w.request(7).body).toBe(built(w, 0, 8)[7]?.body)
    if (probe !== null) expect(w.request(0).plannedPromptTokens).toBe(149)
  })

  test('a plan of 5,000,000 requests holds no body: planning is instant and small', async () => {
    const heapBefore = process.memoryUsage().heapUsed
    const started = performance.now()
    const w = await prepareWorkload(
      { promptTokens: 512, seed: 1 },
      { api: 'chat', maxTokens: 16, requests: 5_000_000, warmupRequests: 0 },
      null,
    )
    const first = w.request(0)
    const last = w.request(4_999_999)
    expect(performance.now() - started).toBeLessThan(1000)
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(20 * 1024 * 1024)
    expect(JSON.parse(first.body).messages[0].content).toMatch(/^Request 1-0\./)
    expect(JSON.parse(last.body).messages[0].content).toMatch(/^Request 1-4999999\./)
    expect(() => w.request(5_000_000)).toThrow(RangeError)
  })

  test('calibration stops between requests when its signal aborts', async () => {
    const stop = new AbortController()
    let calls = 0
    const slow: TokenizerProbe = {
      warning: null,
      tokenizer: {
        description: 'slow',
        countText: async (t) => t.split(/\s+/).length,
        countChat: async (m) => {
          if (++calls === 20) stop.abort()
          return (m[0]?.content ?? '').split(/\s+/).length
        },
      },
    }
    const plan = { api: 'chat' as const, maxTokens: 8, requests: 5_000_000, warmupRequests: 0 }
    await expect(prepareWorkload({ promptTokens: 64 }, plan, slow, stop.signal)).rejects.toMatchObject({ code: 'REQUEST_ABORTED' })
    expect(calls).toBeLessThan(40)
  })
})
