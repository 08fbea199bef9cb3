import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { reportedFacts } from './remote-facts.ts'

const WILD = new URL('../../fixtures/reference/wild/', import.meta.url)

/**
 * The `server_info` SGLang's bench_serving stores: its `GET /get_server_info` answer, verbatim, from
 * a real run (fixtures/reference/wild/PROVENANCE.md).
 */
function wildServerInfo(file: string): Record<string, unknown> {
  const line = readFileSync(new URL(file, WILD), 'utf8').split('\n')[0] as string
  // Python's json writes its request rate as Infinity, which JSON has no word for.
  return (JSON.parse(line.replace(/: -?Infinity/g, ': null')) as { server_info: Record<string, unknown> }).server_info
}

/** `GET /v1/models` as vLLM's ModelCard serializes it (vllm/entrypoints/openai/protocol.py). */
const VLLM_MODELS = {
  object: 'list',
  data: [
    {
      id: 'qwen3-8b',
      object: 'model',
      created: 1764000000,
      owned_by: 'vllm',
      root: '/models/Qwen3-8B',
      parent: null,
      max_model_len: 32768,
      permission: [{ id: 'modelperm-1', object: 'model_permission', created: 1764000000, allow_sampling: true, organization: '*' }],
    },
  ],
}

describe('what a remote endpoint says about itself', () => {
  test('SGLang: a real GET /get_server_info answer gives the kind, tensor-parallel size, weights and served name', () => {
    const serverInfo = wildServerInfo('sglang-12-tonyli15-agg_local.jsonl')
    const facts = reportedFacts({ serverInfo, models: null, metrics: null }, 'Qwen/Qwen2.5-3B-Instruct')
    expect(facts).toEqual({
      kind: { value: 'sglang', source: 'GET /get_server_info', reason: null },
      tensorParallel: { value: 1, source: 'GET /get_server_info (tp_size)', reason: null },
      modelPath: { value: 'Qwen/Qwen2.5-3B-Instruct', source: 'GET /get_server_info (model_path)', reason: null },
      servedModelName: { value: 'Qwen/Qwen2.5-3B-Instruct', source: 'GET /get_server_info (served_model_name)', reason: null },
      // That server ran with context_length null (the model's own default): unknown, not guessed.
      maxContext: {
        value: null,
        source: null,
        reason:
          'neither GET /get_server_info context_length nor /v1/models max_model_len (SGLang reports null for the model’s own default)',
      },
    })
    // Its api_key field is never read.
    expect(JSON.stringify(facts)).not.toContain('api_key')
  })

  test('SGLang with its /v1/models card: the context the card reports fills what the server arguments left null', () => {
    const serverInfo = wildServerInfo('sglang-12-tonyli15-agg_local.jsonl')
    const models = {
      object: 'list',
      data: [{ id: 'Qwen/Qwen2.5-3B-Instruct', owned_by: 'sglang', root: 'Qwen/Qwen2.5-3B-Instruct', max_model_len: 32768 }],
    }
    expect(reportedFacts({ serverInfo, models, metrics: null }, 'Qwen/Qwen2.5-3B-Instruct').maxContext).toEqual({
      value: 32768,
      source: 'GET /v1/models (max_model_len)',
      reason: null,
    })
  })

  test('a real SGLang prefill/decode router: SGLang, and each server’s tensor-parallel size named rather than one guessed', () => {
    const serverInfo = wildServerInfo('sglang-13-tonyli15-pd_1p1d.jsonl')
    const facts = reportedFacts({ serverInfo, models: null, metrics: null }, 'm')
    expect(facts.kind).toEqual({ value: 'sglang', source: 'GET /get_server_info (a prefill/decode router)', reason: null })
    expect(facts.tensorParallel.value).toBeNull()
    expect(facts.tensorParallel.reason).toBe(
      'a prefill/decode router answers, its servers each with their own: prefill tp_size 1 (version 0.5.5.post3), decode tp_size 1 (version 0.5.6)',
    )
  })

  test('vLLM: its /v1/models card (owned_by "vllm") gives the weights and context; the tensor-parallel size it does not report', () => {
    const facts = reportedFacts({ serverInfo: null, models: VLLM_MODELS, metrics: null }, 'qwen3-8b')
    expect(facts).toEqual({
      kind: { value: 'vllm', source: 'GET /v1/models (owned_by "vllm")', reason: null },
      tensorParallel: {
        value: null,
        source: null,
        reason: 'only SGLang reports its tensor-parallel size (GET /get_server_info tp_size); this endpoint does not',
      },
      modelPath: { value: '/models/Qwen3-8B', source: 'GET /v1/models (root)', reason: null },
      servedModelName: { value: 'qwen3-8b', source: 'GET /v1/models (id)', reason: null },
      maxContext: { value: 32768, source: 'GET /v1/models (max_model_len)', reason: null },
    })
  })

  test('the engine’s /metrics names tell it where the model card does not (a gateway’s own card)', () => {
    const models = { object: 'list', data: [{ id: 'm', object: 'model', owned_by: 'gateway' }] }
    const vllm = readFileSync(new URL('../../fixtures/metrics/vllm.txt', import.meta.url), 'utf8')
    const sglang = readFileSync(new URL('../../fixtures/metrics/sglang.txt', import.meta.url), 'utf8')
    expect(reportedFacts({ serverInfo: null, models, metrics: vllm }, 'm').kind).toEqual({
      value: 'vllm',
      source: 'GET /metrics (vllm: names)',
      reason: null,
    })
    expect(reportedFacts({ serverInfo: null, models, metrics: sglang }, 'm').kind.value).toBe('sglang')
    expect(reportedFacts({ serverInfo: null, models, metrics: 'up 1\n' }, 'm').kind).toEqual({
      value: null,
      source: null,
      reason:
        'no engine recognised: GET /get_server_info is not SGLang\'s, GET /v1/models has owned_by "gateway", GET /metrics has no vllm: or sglang: names',
    })
  })
})
