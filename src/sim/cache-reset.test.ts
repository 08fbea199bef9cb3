import { describe, expect, test } from 'vitest'
import { answerCacheEndpoint, type CacheEndpointState } from './cache-reset.ts'
import { blockKeys, PrefixCache } from './prefix-cache.ts'

const held = (): PrefixCache => {
  const cache = new PrefixCache(1024, 4)
  cache.insert(blockKeys([1, 2, 3, 4, 5, 6, 7, 8, 9], 4))
  return cache
}
const state = (over: Partial<CacheEndpointState> = {}): CacheEndpointState => ({
  cache: held(),
  busy: false,
  slots: 1,
  cacheReset: true,
  slotContextTokens: 4096,
  ...over,
})
const none = new URLSearchParams()

describe('answerCacheEndpoint', () => {
  test('while requests run, SGLang refuses with a 400 and vLLM answers 200 but keeps its blocks, as each engine does', () => {
    const sglang = state({ busy: true })
    expect(answerCacheEndpoint('sglang', 'GET', '/flush_cache', none, sglang)?.status).toBe(400)
    expect(sglang.cache.blocks).toBe(2)
    const vllm = state({ busy: true })
    expect(answerCacheEndpoint('vllm', 'POST', '/reset_prefix_cache', none, vllm)?.status).toBe(200)
    expect(vllm.cache.blocks).toBe(2)
  })

  test('each dialect serves only its own endpoints; a wrong method is a 405', () => {
    expect(answerCacheEndpoint('trtllm', 'POST', '/reset_prefix_cache', none, state())).toBeNull()
    expect(answerCacheEndpoint('llama-server', 'POST', '/reset_prefix_cache', none, state())).toBeNull()
    expect(answerCacheEndpoint('vllm', 'GET', '/slots', none, state())).toBeNull()
    expect(answerCacheEndpoint('vllm', 'GET', '/reset_prefix_cache', none, state())?.status).toBe(405)
    expect(answerCacheEndpoint('vllm', 'POST', '/reset_prefix_cache', none, state({ cacheReset: false }))).toBeNull()
  })

  test('llama-server erase reports the tokens it dropped', () => {
    const reply = answerCacheEndpoint('llama-server', 'POST', '/slots/0', new URLSearchParams('action=erase'), state())
    expect(reply).toEqual({ status: 200, contentType: 'application/json', body: JSON.stringify({ id_slot: 0, n_erased: 8 }) })
  })
})
