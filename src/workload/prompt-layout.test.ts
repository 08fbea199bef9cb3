import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { canaryMarker } from './canary.ts'
import { loadDataset } from './dataset.ts'
import { resolveWorkloadSpec } from './prepare.ts'
import { ESTIMATED_TOKENS_PER_WORD, PromptLayout, sharedText } from './prompt-layout.ts'
import { proseSource } from './text.ts'

const plan = { api: 'chat' as const, maxTokens: 16, requests: 3, warmupRequests: 1 }
const ARITHMETIC = fileURLToPath(new URL('../../fixtures/datasets/arithmetic.jsonl', import.meta.url))

describe('PromptLayout', () => {
  test('a prompt is the shared block, its own header, its pieces, its canary and the task, in that order', () => {
    const spec = resolveWorkloadSpec({ promptTokens: 200, seed: 7, canaries: true })
    const layout = new PromptLayout(spec, plan, 'SHARED', null)
    const text = layout.text(2, 5, null)
    const parts = text.split('\n\n')
    expect(parts[0]).toBe('SHARED')
    expect(parts[1]).toBe('Request 7-2.')
    // Request i reads text stream i + 1.
    expect(parts[2]).toBe(proseSource(7, 3).take(5))
    expect(parts[3]).toContain(canaryMarker(7, 2))
    expect(parts[3]).toMatch(/Summarize the notes above in three sentences\.$/)
    expect(layout.total).toBe(4)
    expect(sharedText(spec, 4)).toBe(proseSource(7, 0).take(4))
  })

  test('the estimate fills the planned size at the words-per-token rate, the fixed text counted', () => {
    const spec = resolveWorkloadSpec({ promptTokens: 300, seed: 1 })
    const layout = new PromptLayout(spec, plan, null, null)
    const pieces = layout.estimate(0)
    const words = layout.text(0, pieces, null).split(/\s+/).length
    expect(Math.abs(words * ESTIMATED_TOKENS_PER_WORD - 300)).toBeLessThan(3)
  })

  test('a trace sets each request’s size and max_tokens; its body carries them', () => {
    const spec = resolveWorkloadSpec({ promptTokens: 100 })
    const sizes = [
      { promptTokens: 50, maxTokens: 16 },
      { promptTokens: 500, maxTokens: 40 },
    ]
    const layout = new PromptLayout(spec, { ...plan, requests: 2, sizes }, null, null)
    expect(layout.size(1)).toEqual({ promptTokens: 500, maxTokens: 40 })
    // Warm-up requests keep the spec's size and the plan's max_tokens.
    expect(layout.size(2)).toEqual({ promptTokens: 100, maxTokens: 16 })
    expect(layout.estimate(1)).toBeGreaterThan(layout.estimate(0))
    expect(JSON.parse(layout.body(1, 3, null))).toMatchObject({ max_tokens: 40, stream: true })
    expect(JSON.parse(layout.body(0, 3, null)).max_tokens).toBe(16)
  })

  test('a dataset’s rows cycle over the requests, each prompt the row’s own', async () => {
    const dataset = await loadDataset(ARITHMETIC)
    const spec = resolveWorkloadSpec({ kind: 'dataset', datasetPath: ARITHMETIC, promptTokens: 100 })
    const layout = new PromptLayout(spec, { ...plan, requests: dataset.rows.length + 1 }, null, dataset)
    expect(layout.row(dataset.rows.length)).toBe(dataset.rows[0])
    const row = layout.row(1)
    expect(layout.text(1, 0, row)).toContain(row?.prompt as string)
    expect(JSON.parse(layout.body(1, 0, row)).messages[0].content).toContain(row?.prompt as string)
  })
})
