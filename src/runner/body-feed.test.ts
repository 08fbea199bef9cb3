import { describe, expect, test } from 'vitest'
import { digestSent, stripModel } from '../client/sent-digest.ts'
import { requestStreamSha256 } from '../workload/bytes.ts'
import { prepareWorkload, streamSha256 } from '../workload/prepare.ts'
import { BodyFeed, WireHash } from './body-feed.ts'

const plan = { api: 'chat' as const, maxTokens: 8, requests: 50, warmupRequests: 0 }

describe('BodyFeed', () => {
  test('taken in order, its bytes and hash are what eager preparation gives; the look-ahead stays bounded', async () => {
    const w = await prepareWorkload({ promptTokens: 100, seed: 3, canaries: true }, plan, null)
    const feed = new BodyFeed(w, 'm', 0, w.measuredCount, new AbortController().signal, 4)
    const wire = new WireHash()
    const sent: Buffer[] = []
    for (let i = 0; i < w.measuredCount; i++) {
      const fed = feed.take(i)
      expect(fed.bytes.equals(Buffer.from(`{"model":"m",${w.request(i).body.slice(1)}`))).toBe(true)
      sent.push(fed.bytes)
      await new Promise((resolve) => setImmediate(resolve))
    }
    // Requests end out of order; the wire hash is still in plan order.
    for (const i of [...sent.keys()].reverse()) wire.add(i, digestSent([sent[i] as Buffer], 'm'))
    const eager = requestStreamSha256(sent.map((b) => stripModel('m', b) as Buffer))
    expect(feed.requestStreamSha256).toBe(streamSha256(w))
    expect(wire.digest()).toBe(eager)
    expect(eager).toBe(streamSha256(w))
    feed.close()
  })

  test('after an abort no body is built and the planned hash is withheld', async () => {
    const w = await prepareWorkload({ promptTokens: 100 }, plan, null)
    const stop = new AbortController()
    const feed = new BodyFeed(w, 'm', 0, w.measuredCount, stop.signal)
    feed.take(0)
    stop.abort()
    expect(feed.take(1).bytes.length).toBe(0)
    expect(feed.take(1).planned.maxTokens).toBe(8)
    expect(feed.requestStreamSha256).toBeNull()
    feed.close()
  })
})

describe('BodyFeed.prefill', () => {
  const big = { ...plan, requests: 400 }

  test('builds every body of a phase that fits the budget, so none is built while it runs', async () => {
    const w = await prepareWorkload({ promptTokens: 100, seed: 5 }, big, null)
    const feed = new BodyFeed(w, 'm', 0, w.measuredCount, new AbortController().signal, 8)
    feed.prefill()
    expect(feed.ready).toBe(400)
    for (let i = 0; i < 400; i++) feed.take(i)
    expect(feed.ready).toBe(0)
    expect(feed.requestStreamSha256).toBe(streamSha256(w))
    feed.close()
  })

  test('stops at the byte budget, never below the look-ahead, and refills behind the takes', async () => {
    const w = await prepareWorkload({ promptTokens: 100, seed: 5 }, big, null)
    const bodyBytes = Buffer.byteLength(w.request(0).body)
    const feed = new BodyFeed(w, 'm', 0, w.measuredCount, new AbortController().signal, 8)
    feed.prefill(20 * bodyBytes)
    // About 20 bodies (each a little longer with its model name), not all 400.
    expect(feed.ready).toBeGreaterThanOrEqual(15)
    expect(feed.ready).toBeLessThanOrEqual(21)
    const tiny = new BodyFeed(w, 'm', 0, w.measuredCount, new AbortController().signal, 8)
    tiny.prefill(1)
    expect(tiny.ready).toBe(8)
    for (let i = 0; i < 100; i++) {
      tiny.take(i)
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(tiny.ready).toBe(8)
    feed.close()
    tiny.close()
  })

  test('a feed without a look-ahead (a conversation) builds nothing ahead', async () => {
    const w = await prepareWorkload({ promptTokens: 100 }, big, null)
    const feed = new BodyFeed(w, 'm', 0, w.measuredCount, new AbortController().signal, 0)
    feed.prefill()
    expect(feed.ready).toBe(0)
    feed.close()
  })
})
