import { describe, expect, test } from 'vitest'
import { ReplyDraftTally, specDecodeFromCounts } from '../metrics/spec-decode.ts'
import { parseExposition } from './exposition.ts'
import { type EngineSnapshot, readEngineMetrics, specDecodeOver } from './prometheus.ts'

/** vLLM V1 with --speculative-config, as prometheus_client writes its counters (`_total` and `_created`). */
function vllm(drafts: number, draftTokens: number, accepted: number, perPos: number[]): string {
  const labels = 'engine="0",model_name="Qwen/Qwen3-8B"'
  return [
    '# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.',
    '# TYPE vllm:spec_decode_num_drafts_total counter',
    `vllm:spec_decode_num_drafts_total{${labels}} ${drafts}`,
    `vllm:spec_decode_num_drafts_created{${labels}} 1.7e9`,
    '# TYPE vllm:spec_decode_num_draft_tokens_total counter',
    `vllm:spec_decode_num_draft_tokens_total{${labels}} ${draftTokens}`,
    '# TYPE vllm:spec_decode_num_accepted_tokens_total counter',
    `vllm:spec_decode_num_accepted_tokens_total{${labels}} ${accepted}`,
    '# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter',
    ...perPos.map((n, p) => `vllm:spec_decode_num_accepted_tokens_per_pos_total{${labels},position="${p}"} ${n}`),
    `vllm:kv_cache_usage_perc{${labels}} 0.1`,
    '',
  ].join('\n')
}

/** What this repository's llama-server build (80fb11a) printed after one greedy reply with itself as its draft. */
const LLAMACPP = `# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 14
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted by the target model
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 14
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 5
# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 5
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 5
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 4
llamacpp:requests_processing 0
`

const at = (atMs: number, text: string, kind: 'vllm' | 'llama-server' | 'sglang'): EngineSnapshot => ({
  atMs,
  reading: readEngineMetrics(parseExposition(text), kind, kind === 'vllm' ? 'Qwen/Qwen3-8B' : undefined),
})

describe('speculative decoding from /metrics', () => {
  test('vLLM: the counters over the load window; acceptance = accepted ÷ draft tokens, length = 1 + accepted ÷ drafts', () => {
    const base = at(0, vllm(10, 30, 20, [9, 7, 4]), 'vllm')
    expect(base.reading.specDecode).toMatchObject({ drafts: 10, draftTokens: 30, acceptedTokens: 20, acceptedByPosition: [9, 7, 4] })
    const last = at(1000, vllm(110, 330, 230, [99, 77, 54]), 'vllm')
    expect(specDecodeOver(base, last)).toEqual({
      source: 'prometheus-counters',
      drafts: 100,
      draftTokens: 300,
      acceptedTokens: 210,
      acceptanceRate: 0.7,
      meanAcceptanceLength: 3.1,
      acceptanceRateByPosition: [0.9, 0.7, 0.5],
      note: null,
    })
  })

  test('llama.cpp: the same counters under llamacpp:, unlabelled', () => {
    const idle = at(0, 'llamacpp:requests_processing 0\n', 'llama-server')
    expect(idle.reading.specDecode).toBeNull()
    const s = specDecodeOver(idle, at(1000, LLAMACPP, 'llama-server'))
    expect(s).toMatchObject({ source: 'prometheus-counters', drafts: 5, draftTokens: 14, acceptedTokens: 14, acceptanceRate: 1 })
    expect(s?.meanAcceptanceLength).toBeCloseTo(3.8, 12)
    expect(s?.acceptanceRateByPosition).toEqual([1, 1, 0.8])
  })

  test('SGLang: its gauges at the end of the window, no counts, and the note says so', () => {
    const text = [
      'sglang:spec_accept_length{model_name="m",tp_rank="0",dp_rank="0"} 2.9',
      'sglang:spec_accept_rate{model_name="m",tp_rank="0",dp_rank="0"} 0.27',
      '',
    ].join('\n')
    const s = specDecodeOver(at(0, text, 'sglang'), at(1000, text, 'sglang'))
    expect(s).toMatchObject({ source: 'prometheus-gauges', drafts: null, acceptanceRate: 0.27, meanAcceptanceLength: 2.9 })
    expect(s?.note).toMatch(/last logging window/)
    const older = specDecodeOver(null, at(1000, 'sglang:spec_accept_length{model_name="m"} 3.74\n', 'sglang'))
    expect(older).toMatchObject({ acceptanceRate: null, meanAcceptanceLength: 3.74 })
    expect(older?.note).toMatch(/no sglang:spec_accept_rate/)
  })

  test('nothing drafted in the window, one reading only, or a counter that went back: null, never 0', () => {
    const same = vllm(10, 30, 20, [9, 7, 4])
    expect(specDecodeOver(at(0, same, 'vllm'), at(1000, same, 'vllm'))).toBeNull()
    const only = at(0, same, 'vllm')
    expect(specDecodeOver(only, only)).toBeNull()
    expect(specDecodeOver(at(0, vllm(110, 330, 230, [99, 77, 54]), 'vllm'), at(1000, same, 'vllm'))).toBeNull()
    expect(specDecodeOver(at(0, 'vllm:kv_cache_usage_perc 0\n', 'vllm'), at(1, 'vllm:kv_cache_usage_perc 0\n', 'vllm'))).toBeNull()
  })
})

describe("llama-server's per-reply timings", () => {
  test('draft_n and draft_n_accepted summed over the replies that carry them; no draft count, so no length', () => {
    const tally = new ReplyDraftTally()
    tally.add({ predicted_n: 20, draft_n: 14, draft_n_accepted: 14 })
    tally.add({ predicted_n: 20, draft_n: 21, draft_n_accepted: 11 })
    tally.add({ predicted_n: 20 })
    tally.add(null)
    const s = tally.metrics()
    expect(s).toMatchObject({ source: 'response-timings', drafts: null, draftTokens: 35, acceptedTokens: 25, meanAcceptanceLength: null })
    expect(s?.acceptanceRate).toBeCloseTo(25 / 35, 12)
    expect(s?.note).toMatch(/no drafts/)
    expect(new ReplyDraftTally().metrics()).toBeNull()
  })

  test('counts without drafts give no rate', () => {
    expect(specDecodeFromCounts({ drafts: 0, draftTokens: 0, acceptedTokens: 0, acceptedByPosition: null }, 'response-timings')).toBeNull()
  })
})
