import type { MetricsDialect } from './metrics.ts'
import type { PrefixCache } from './prefix-cache.ts'

/** A reply of a cache endpoint: status, content type and body. */
export interface CacheReply {
  status: number
  contentType: 'application/json' | 'text/plain'
  body: string
}

/** What a cache endpoint reads of the engine. */
export interface CacheEndpointState {
  cache: PrefixCache
  /** Requests open now (queued, prefilling or decoding). */
  busy: boolean
  /** llama-server's slots (`-np`). */
  slots: number
  /** The reset is served (vLLM's `VLLM_SERVER_DEV_MODE=1`, llama-server's `--slot-save-path`). */
  cacheReset: boolean
  /** The context of one llama-server slot, tokens. */
  slotContextTokens: number
}

const json = (status: number, value: unknown): CacheReply => ({ status, contentType: 'application/json', body: JSON.stringify(value) })

/** llama.cpp's error body (`format_error_response`). */
const llamaError = (status: number, type: string, message: string): CacheReply => json(status, { error: { code: status, message, type } })

const SGLANG_FLUSH_TEXT =
  'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n'

/** vLLM's `POST /reset_prefix_cache`: 200 with no body, whether or not it reset (vLLM keeps blocks in use and only logs it). */
function vllmReset(state: CacheEndpointState): CacheReply {
  if (!state.busy) state.cache.reset()
  return { status: 200, contentType: 'text/plain', body: '' }
}

/** SGLang's `/flush_cache` (GET or POST): refused with a 400 while requests run or wait. */
function sglangFlush(state: CacheEndpointState): CacheReply {
  if (state.busy) return { status: 400, contentType: 'text/plain', body: SGLANG_FLUSH_TEXT }
  state.cache.reset()
  return { status: 200, contentType: 'text/plain', body: SGLANG_FLUSH_TEXT }
}

/** llama-server's `GET /slots`: one entry per slot, none processing between requests. */
function llamaSlots(state: CacheEndpointState): CacheReply {
  const slots = Array.from({ length: state.slots }, (_, id) => ({
    id,
    id_task: -1,
    n_ctx: state.slotContextTokens,
    speculative: false,
    is_processing: state.busy,
  }))
  return json(200, slots)
}

/**
 * llama-server's `POST /slots/{id}?action=erase`: 501 without `--slot-save-path`, as the real
 * server answers every slot action then. The sim's cache is one pool for all slots, so erasing a
 * slot empties it.
 */
function llamaSlotAction(state: CacheEndpointState, idText: string, action: string | null): CacheReply {
  if (!state.cacheReset) {
    return llamaError(501, 'not_supported_error', 'This server does not support slots action. Start it with `--slot-save-path`')
  }
  if (!/^\d+$/.test(idText)) return llamaError(400, 'invalid_request_error', 'Invalid slot ID')
  if (action !== 'erase') return llamaError(400, 'invalid_request_error', 'Invalid action')
  const id = Number(idText)
  if (id >= state.slots) return llamaError(400, 'invalid_request_error', 'Invalid slot ID')
  const blocks = state.cache.reset()
  return json(200, { id_slot: id, n_erased: blocks * state.cache.blockTokens })
}

/**
 * The answer of the dialect's prefix-cache endpoints to one request, as the real engine answers
 * it (the reset it asks for done); null when the path is none of them (the caller answers 404).
 * vLLM: `POST /reset_prefix_cache` (404 unless `cacheReset`); SGLang: `/flush_cache`; llama-server:
 * `GET /slots` and `POST /slots/{id}?action=erase`.
 * @example answerCacheEndpoint('vllm', 'POST', '/reset_prefix_cache', new URLSearchParams(), state) // { status: 200, … }
 */
export function answerCacheEndpoint(
  dialect: MetricsDialect,
  method: string,
  path: string,
  query: URLSearchParams,
  state: CacheEndpointState,
): CacheReply | null {
  if (dialect === 'vllm' && path === '/reset_prefix_cache' && state.cacheReset) {
    return method === 'POST' ? vllmReset(state) : json(405, { detail: 'Method Not Allowed' })
  }
  if (dialect === 'sglang' && path === '/flush_cache') {
    return method === 'POST' || method === 'GET' ? sglangFlush(state) : json(405, { detail: 'Method Not Allowed' })
  }
  if (dialect === 'llama-server') {
    if (path === '/slots' && method === 'GET') return llamaSlots(state)
    const slot = /^\/slots\/([^/]+)$/.exec(path)
    if (slot !== null && method === 'POST') return llamaSlotAction(state, slot[1] as string, query.get('action'))
  }
  return null
}
