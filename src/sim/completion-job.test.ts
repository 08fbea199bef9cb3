import { randomUUID } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { memoryExchange } from '../../fixtures/memory-exchange.ts'
import { CompletionJob } from './completion-job.ts'
import type { EndedCompletion } from './served-tally.ts'
import type { StreamPlan } from './sim-stream.ts'

const plan = (outputTokens: number): StreamPlan => ({
  header: { api: 'chat', id: `chatcmpl-${randomUUID()}`, created: 0, model: 'm' },
  promptTokens: 12,
  outputTokens,
  reasoningTokens: 0,
  finishReason: 'length',
  includeUsage: true,
  reportCachedTokens: false,
  keepContent: false,
  tokensPerChunk: 1,
  fault: null,
  usageLie: null,
  eol: '\n',
  keepaliveMs: null,
  leadContent: [],
  nextToken: () => ' w',
})

describe('CompletionJob', () => {
  test('reserves its prompt and output; its first step is its first token; its end reports the timings', async () => {
    const x = memoryExchange('POST', '/v1/chat/completions')
    const ends: EndedCompletion[] = []
    const job = new CompletionJob(x.res, plan(3), false, (e) => ends.push(e))
    expect([job.promptTokens, job.reservedTokens]).toEqual([12, 15])
    job.stream.open()
    await new Promise((resolve) => setTimeout(resolve, 5))
    const steps = [job.step(), job.step(), job.step()]
    expect(steps).toEqual([true, true, false])
    await x.finished
    expect(x.body()).toContain('data: [DONE]')
    expect(ends).toHaveLength(1)
    const [end] = ends as [EndedCompletion]
    expect(end).toMatchObject({ emittedTokens: 3, complete: true, faulted: false, promptTokens: 12 })
    expect(end.firstTokenAt as number).toBeGreaterThanOrEqual(end.openedAt + 4)
    expect(end.endedAt).toBeGreaterThanOrEqual(end.firstTokenAt as number)
  })

  test('disposed before its prefill ended: no first token, nothing emitted, not complete', () => {
    const x = memoryExchange('POST', '/v1/chat/completions')
    const ends: EndedCompletion[] = []
    const job = new CompletionJob(x.res, plan(3), true, (e) => ends.push(e))
    job.stream.open()
    job.stream.dispose()
    expect(ends).toMatchObject([{ emittedTokens: 0, complete: false, faulted: true, firstTokenAt: null }])
  })
})
