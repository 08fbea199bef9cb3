import { describe, expect, test } from 'vitest'
import type { EngineTokenizer } from '../client/tokenize.ts'
import { resolveWorkloadSpec } from './prepare.ts'
import { calibrationTolerance, PromptCalibrator } from './prompt-calibrator.ts'
import { PromptLayout } from './prompt-layout.ts'

const plan = { api: 'completions' as const, maxTokens: 16, requests: 4, warmupRequests: 0 }

/** One token per word, plus `template` for a chat; fails from call `failAt` on. */
function words(failAt = Infinity, template = 0): EngineTokenizer & { calls: number } {
  const t = {
    calls: 0,
    description: 'words',
    countText: async (text: string) => {
      if (++t.calls >= failAt) throw new Error('tokenizer down')
      return text.split(/\s+/).filter(Boolean).length
    },
    countChat: async (messages: ReadonlyArray<{ content: string }>) => template + (await t.countText(messages[0]?.content ?? '')),
  }
  return t
}

describe('PromptCalibrator', () => {
  test('fits every request to its size with the engine’s counts, within the tolerance', async () => {
    const spec = resolveWorkloadSpec({ promptTokens: 200 })
    const layout = new PromptLayout(spec, plan, null, null)
    const calibrator = new PromptCalibrator({ tokenizer: words(), warning: null }, 'completions')
    const fitted = await calibrator.fitRequests(layout)
    expect(fitted).not.toBeNull()
    for (let i = 0; i < 4; i++) {
      const tokens = fitted?.tokens[i] as number
      expect(Math.abs(tokens - 200)).toBeLessThanOrEqual(calibrationTolerance(200))
      expect(layout.text(i, fitted?.pieces[i] as number, null).split(/\s+/).length).toBe(tokens)
    }
    expect(fitted?.outsideTolerance).toBe(0)
    expect(calibrator.warning).toBeNull()
  })

  test('a chat prompt is counted as the chat endpoint counts it, template included', async () => {
    const spec = resolveWorkloadSpec({ promptTokens: 200 })
    const layout = new PromptLayout(spec, { ...plan, api: 'chat' }, null, null)
    const fitted = await new PromptCalibrator({ tokenizer: words(Infinity, 30), warning: null }, 'chat').fitRequests(layout)
    const words0 = layout.text(0, fitted?.pieces[0] as number, null).split(/\s+/).length
    expect(fitted?.tokens[0]).toBe(words0 + 30)
  })

  test('without a tokenizer nothing is fitted, and the warning says the sizes are estimated', async () => {
    const calibrator = new PromptCalibrator(null, 'chat')
    const spec = resolveWorkloadSpec({ promptTokens: 200, prefixCache: { mode: 'shared', tokens: 50 } })
    expect(await calibrator.fitRequests(new PromptLayout(spec, plan, null, null))).toBeNull()
    expect(await calibrator.fitShared(spec, 50)).toMatchObject({ tokens: null })
    expect(calibrator.warning).toBe('no tokenizer was probed; prompt sizes are estimated')
  })

  test('a tokenizer that fails mid-plan is dropped from that request on, and the warning names it', async () => {
    const spec = resolveWorkloadSpec({ promptTokens: 200 })
    const layout = new PromptLayout(spec, plan, null, null)
    const tokenizer = words(3)
    const calibrator = new PromptCalibrator({ tokenizer, warning: null }, 'completions')
    const fitted = await calibrator.fitRequests(layout)
    expect(calibrator.warning).toMatch(
      /tokenizer failed during calibration \(tokenizer down\); prompt sizes are estimated from request \d+ on/,
    )
    const failedAt = Number(/from request (\d+)/.exec(calibrator.warning as string)?.[1])
    expect(Number.isNaN(fitted?.tokens[failedAt] as number)).toBe(true)
    expect(fitted?.pieces[failedAt]).toBe(layout.estimate(failedAt))
    const calls = tokenizer.calls
    await calibrator.fitShared(spec, 50)
    expect(tokenizer.calls).toBe(calls)
  })

  test('the shared block is fitted to its size; an abort stops between requests', async () => {
    const spec = resolveWorkloadSpec({ promptTokens: 200, prefixCache: { mode: 'shared', tokens: 60 } })
    const calibrator = new PromptCalibrator({ tokenizer: words(), warning: null }, 'completions')
    const shared = await calibrator.fitShared(spec, 60)
    expect(shared.tokens).toBe(60)
    expect(shared.text.split(/\s+/)).toHaveLength(60)
    const stop = new AbortController()
    stop.abort()
    await expect(calibrator.fitRequests(new PromptLayout(spec, plan, shared.text, null), stop.signal)).rejects.toMatchObject({
      code: 'REQUEST_ABORTED',
    })
  })
})
