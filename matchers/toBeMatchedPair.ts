import { isDeepStrictEqual } from 'node:util'
import type { MatcherState } from 'vitest'
import type { Manifest } from '../src/schema/manifest.ts'
import type { RunRecord } from '../src/schema/run.ts'
import { message } from './format.ts'
import { asPair, cellFailures, type PairSubject } from './subject.ts'

/** One fairness fact compared between the arms (DESIGN.md "what makes a matched pair"). */
interface Check {
  name: string
  of: (r: RunRecord) => unknown
}

const gpus = (m: Manifest | null) => (m === null ? null : m.gpus.status === 'ok' ? m.gpus.devices.map((d) => ({ name: d.name, memoryTotalMiB: d.memoryTotalMiB })) : 'absent')
const drivers = (m: Manifest | null) => (m === null ? null : m.gpus.status === 'ok' ? [...new Set(m.gpus.devices.map((d) => d.driverVersion))] : 'absent')

const CHECKS: Check[] = [
  { name: 'request stream sha256', of: (r) => r.plan.workload.requestStreamSha256 },
  { name: 'request count', of: (r) => r.plan.requests },
  { name: 'concurrency', of: (r) => r.plan.concurrency },
  // Open loop: the same send schedule (and cap, and trace file) on both arms; null for the closed loop.
  { name: 'arrivals', of: (r) => (r.plan.arrival === null ? null : { schedule: r.plan.arrival.scheduleSha256, maxInFlight: r.plan.arrival.maxInFlight, trace: r.plan.arrival.trace?.sha256 ?? null }) },
  { name: 'max tokens', of: (r) => r.plan.maxTokens },
  { name: 'sampling parameters', of: (r) => r.plan.workload.sampling },
  { name: 'output control', of: (r) => r.plan.workload.outputControl },
  { name: 'model revision', of: (r) => r.manifest?.model.revision ?? null },
  { name: 'GPU model and memory', of: (r) => gpus(r.manifest) },
  { name: 'GPU driver', of: (r) => drivers(r.manifest) },
  { name: 'harness hash', of: (r) => r.manifest?.harness.hash ?? null },
  { name: 'host', of: (r) => (r.manifest === null ? null : { ...r.manifest.host, node: undefined }) },
]

const show = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v))

/** Every reason the pair is not matched; empty when it is. */
export function pairMismatches(p: PairSubject): string[] {
  const out = cellFailures(p).map((f) => `a cell failed, so nothing can be compared: ${f}`)
  const all = [...p.baseline, ...p.candidate]
  const first = p.baseline[0] as RunRecord
  for (const check of CHECKS) {
    const want = check.of(first)
    const differing = all.filter((r) => !isDeepStrictEqual(check.of(r), want))
    if (differing.length > 0) out.push(`${check.name}: baseline ${show(want)} ≠ ${show(check.of(differing[0] as RunRecord))}`)
  }
  for (const [label, r] of all.map((r, i) => [i < p.baseline.length ? 'baseline' : 'candidate', r] as const)) {
    if (r.plan.workload.requestStreamSha256 === null) out.push(`${label}: no request stream hash recorded`)
    if (r.plan.workload.wireMatchesPlan === false) out.push(`${label}: the bytes written to the socket differ from the planned request stream`)
    if (r.manifest === null) out.push(`${label}: no manifest (engine, model, GPU and harness facts are unknown)`)
  }
  // Model fingerprints are compared where both arms have one (engine-side files).
  const prints = all.map((r) => r.manifest?.model.fingerprint.value ?? null).filter((v): v is string => v !== null)
  if (new Set(prints).size > 1) out.push(`model fingerprint: ${[...new Set(prints)].map((v) => v.slice(0, 12)).join(' ≠ ')}`)
  // Same prompts, same tokens: per request, the engines' own prompt token counts.
  const tokens = (r: RunRecord) => new Map(r.requests.flatMap((q) => (q.status === 'ok' && q.promptTokens !== null ? [[q.index, q.promptTokens] as const] : [])))
  const base = tokens(first)
  for (const r of all.slice(1)) {
    const other = tokens(r)
    const diff = [...base].filter(([i, n]) => other.has(i) && other.get(i) !== n)
    if (diff.length > 0) {
      const [i, n] = diff[0] as [number, number]
      out.push(`input tokens: ${diff.length} requests differ (request ${i}: ${n} ≠ ${other.get(i)})`)
      break
    }
  }
  return [...new Set(out)]
}

/**
 * Passes when both arms measured the same thing (DESIGN.md's fairness list): the same request
 * stream on the wire, counts, input tokens, model revision and fingerprint, GPU model, memory
 * and driver, harness, host and sampling. The message names every mismatch; GPU UUIDs are
 * reported, not required.
 */
export function toBeMatchedPair(this: MatcherState, received: unknown) {
  const p = asPair('toBeMatchedPair', received)
  const mismatches = pairMismatches(p)
  const uuids = (arm: readonly RunRecord[]) =>
    arm.flatMap((r) => (r.manifest?.gpus.status === 'ok' ? r.manifest.gpus.devices.map((d) => d.uuid ?? '?') : [])).join(', ') || 'none'
  const pass = mismatches.length === 0
  return {
    pass,
    message: () =>
      message(
        this,
        'toBeMatchedPair',
        [['Expected', this.isNot ? 'the pair to differ in some fairness fact' : 'every fairness fact equal on both arms']],
        [
          ['Received', pass ? `a matched pair (${p.baseline.length}+${p.candidate.length} launches)` : `${mismatches.length} mismatch${mismatches.length === 1 ? '' : 'es'}`],
          ['GPU UUIDs', `baseline ${uuids(p.baseline)}; candidate ${uuids(p.candidate)} (reported, not required)`],
        ],
        mismatches.map((m) => `- ${m}`),
      ),
  }
}
