/**
 * Is a pair matched? The fairness list (docs/gates.md, matched pairs) compared between the arms' run records: the
 * same request stream on the wire, counts, input tokens, model revision and fingerprint, GPU
 * model, memory and driver, harness, host and sampling. Pure: the matcher and `servegate
 * compare` share it.
 */
import { isDeepStrictEqual } from 'node:util'
import type { Manifest } from '../schema/manifest.ts'
import type { RunRecord } from '../schema/run.ts'

/** The two arms' records, one per launch. */
export interface FairnessPair {
  baseline: readonly RunRecord[]
  candidate: readonly RunRecord[]
}

function failedCells(p: FairnessPair): string[] {
  const label = (arm: string, i: number, n: number) => (n > 1 ? `${arm} launch ${i + 1}` : arm)
  return [
    ...p.baseline.map((r, i) => [label('baseline', i, p.baseline.length), r] as const),
    ...p.candidate.map((r, i) => [label('candidate', i, p.candidate.length), r] as const),
  ].flatMap(([l, r]) => (r.cellFailure === null ? [] : [`${l}: ${r.cellFailure.code}: ${r.cellFailure.message.split('\n')[0]}`]))
}

/** One fairness fact compared between the arms (docs/gates.md, "what makes a matched pair"). */
interface Check {
  name: string
  of: (r: RunRecord) => unknown
}

const gpus = (m: Manifest | null) =>
  m === null ? null : m.gpus.status === 'ok' ? m.gpus.devices.map((d) => ({ name: d.name, memoryTotalMiB: d.memoryTotalMiB })) : 'absent'
const drivers = (m: Manifest | null) =>
  m === null ? null : m.gpus.status === 'ok' ? [...new Set(m.gpus.devices.map((d) => d.driverVersion))] : 'absent'

const CHECKS: Check[] = [
  { name: 'request stream sha256', of: (r) => r.plan.workload.requestStreamSha256 },
  { name: 'request count', of: (r) => r.plan.requests },
  { name: 'concurrency', of: (r) => r.plan.concurrency },
  // Open loop: the same send schedule (and cap, and trace file) on both arms; null for the closed loop.
  {
    name: 'arrivals',
    of: (r) =>
      r.plan.arrival === null
        ? null
        : { schedule: r.plan.arrival.scheduleSha256, maxInFlight: r.plan.arrival.maxInFlight, trace: r.plan.arrival.trace?.sha256 ?? null },
  },
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
export function pairMismatches(p: FairnessPair): string[] {
  const out = failedCells(p).map((f) => `a cell failed, so nothing can be compared: ${f}`)
  const all = [...p.baseline, ...p.candidate]
  const first = p.baseline[0] as RunRecord
  for (const check of CHECKS) {
    const want = check.of(first)
    const differing = all.filter((r) => !isDeepStrictEqual(check.of(r), want))
    if (differing.length > 0) out.push(`${check.name}: baseline ${show(want)} ≠ ${show(check.of(differing[0] as RunRecord))}`)
  }
  for (const [label, r] of all.map((r, i) => [i < p.baseline.length ? 'baseline' : 'candidate', r] as const)) {
    if (r.plan.workload.requestStreamSha256 === null) out.push(`${label}: no request stream hash recorded`)
    if (r.plan.workload.wireMatchesPlan === false)
      out.push(`${label}: the bytes written to the socket differ from the planned request stream`)
    if (r.manifest === null) out.push(`${label}: no manifest (engine, model, GPU and harness facts are unknown)`)
  }
  // Model fingerprints are compared where both arms have one (engine-side files).
  const prints = all.map((r) => r.manifest?.model.fingerprint.value ?? null).filter((v): v is string => v !== null)
  if (new Set(prints).size > 1) out.push(`model fingerprint: ${[...new Set(prints)].map((v) => v.slice(0, 12)).join(' ≠ ')}`)
  // Same prompts, same tokens: per request, the engines' own prompt token counts.
  const tokens = (r: RunRecord) =>
    new Map(r.requests.flatMap((q) => (q.status === 'ok' && q.promptTokens !== null ? [[q.index, q.promptTokens] as const] : [])))
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
