// Type tests of the spec API and matchers: checked by `tsc -p test-d` (npm run typecheck:dist) against the built .d.ts, as a consumer
// compiles them, never run.
import { expect, expectTypeOf } from 'vitest'
import { cell, engine, pair, storedBaseline } from 'servegate'
import type { CellResult, PairResult, RunRecord, StoredBaseline } from 'servegate'

const model = { id: 'Qwen/Qwen3-8B', revision: '5112966d' }
const a = engine.vllm({ model })
const b = engine.nodeLlamaCpp({ model: { id: 'tiny', path: 'tiny.gguf' }, sequences: 4 })

// @ts-expect-error: an engine needs its model
engine.vllm({})
// @ts-expect-error: node-llama-cpp needs a local GGUF path
engine.nodeLlamaCpp({ model: { id: 'tiny' } })
// @ts-expect-error: no such engine option
engine.sglang({ model, slots: 2 })
// A remote endpoint is named on purpose, with its CA for https.
engine.external({ baseUrl: 'https://gateway.internal:8443/v1', model, remote: true, caFile: 'certs/ca.pem' })
// @ts-expect-error: remote is a boolean
engine.external({ baseUrl: 'http://10.0.0.2:8000', model, remote: 'yes' })
// Its GPU facts from the deployment's DCGM exporter, not from nvidia-smi here.
engine.external({ baseUrl: 'http://10.0.0.5:8000', model, remote: true, gpuMetricsUrl: 'http://10.0.0.5:9400/metrics' })
// @ts-expect-error: the exporter's metrics URL is a string
engine.external({ baseUrl: 'http://10.0.0.5:8000', model, remote: true, gpuMetricsUrl: 9400 })
// A Kubernetes deployment: a manifest or a Helm release, its rollouts awaited.
engine.kubernetes({ baseUrl: 'http://gw.internal:80', model, manifest: 'vllm.yaml', rollout: ['deployment/vllm'] })
engine.kubernetes({ baseUrl: 'http://gw.internal:80', model, helm: { chart: 'oci://r/vllm', release: 'bench-a', set: { replicas: '2' } } })
// @ts-expect-error: a wait names its resource
engine.kubernetes({ baseUrl: 'http://gw.internal:80', model, manifest: 'vllm.yaml', wait: [{ condition: 'Available' }] })

const p = pair({ baseline: a, candidate: b, concurrency: 4, requests: 64, workload: { promptTokens: 1024 } })
expectTypeOf(p).toExtend<PromiseLike<PairResult>>()
// @ts-expect-error: a pair needs both arms
pair({ baseline: a, concurrency: 4 })
// @ts-expect-error: concurrency is a number
pair({ baseline: a, candidate: b, concurrency: '4' })
// @ts-expect-error: an unknown workload kind
pair({ baseline: a, candidate: b, workload: { kind: 'natural' } })

const c = cell({ engine: a, concurrency: 2 })
expectTypeOf(c).toExtend<PromiseLike<CellResult>>()

async function matchers(): Promise<void> {
  const measured = await p
  expect(measured).toBeMatchedPair()
  expect(measured).toWinDecode({ margin: 0.05, looks: [16, 32, 64, 128] })
  expect(measured).toHoldLatency({ metric: 'ttft', percentile: 95, notWorseThanPct: 10 })
  expect(measured).toStayWithinAccuracyGap({ points: 2, outputLengthPct: 10 })
  // @ts-expect-error: the margin is a number
  expect(measured).toWinDecode({ margin: '5%' })
  // @ts-expect-error: an unknown latency metric
  expect(measured).toHoldLatency({ metric: 'latency', percentile: 95, notWorseThanPct: 10 })
  // @ts-expect-error: percentiles are 50, 90, 95 or 99
  expect(measured).toHoldLatency({ metric: 'ttft', percentile: 97, notWorseThanPct: 10 })
  // Every gate matcher takes the inconclusive policy.
  expect(measured).toHoldLatency({ metric: 'ttft', percentile: 95, notWorseThanPct: 10, inconclusive: 'fail' })
  expect(measured).toWinThroughput({ inconclusive: 'pass' })
  // @ts-expect-error: an inconclusive outcome passes or fails
  expect(measured).toWinDecode({ inconclusive: 'warn' })
  expect(measured).toReuseCache({ atLeast: 0.5, arm: 'candidate', turns: { from: 2 } })
  // @ts-expect-error: the least cached share is required
  expect(measured).toReuseCache({ arm: 'candidate' })
  // @ts-expect-error: an arm is 'baseline' or 'candidate'
  expect(measured).toReuseCache({ atLeast: 0.5, arm: 'both' })
}
void matchers

async function againstStoredBaseline(): Promise<void> {
  const main = await storedBaseline('baseline/tiny-c4.json')
  expectTypeOf(main).toEqualTypeOf<StoredBaseline>()
  expectTypeOf(main.record).toEqualTypeOf<RunRecord>()
  expect({ baseline: main, candidate: await c }).toWinDecode({ margin: 0.05 })
  // @ts-expect-error: the path is a string
  await storedBaseline(42)
}
void againstStoredBaseline

// A record's GPU facts: nvidia-smi's here, a DCGM exporter's, or unknown for a remote host; a remote engine's own facts.
type RecordManifest = NonNullable<RunRecord['manifest']>
expectTypeOf<RecordManifest['gpus']['status']>().toEqualTypeOf<'ok' | 'absent' | 'unknown'>()
expectTypeOf<Extract<RecordManifest['gpus'], { status: 'ok' }>['source']>().toEqualTypeOf<'dcgm-exporter' | undefined>()
expectTypeOf<NonNullable<RecordManifest['engine']['reported']>['kind']['value']>().toEqualTypeOf<'vllm' | 'sglang' | 'trtllm' | null>()
