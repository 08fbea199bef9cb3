/**
 * Is a pair matched? The fairness list (docs/gates.md, matched pairs) compared between the arms' run records: the
 * same request stream on the wire, counts, input tokens, model revision and fingerprint, GPU
 * model, memory and driver, harness, host, sampling and network path. Pure: the matcher and `servegate
 * compare` share it.
 */
import { isDeepStrictEqual } from 'node:util'
import type { Manifest } from '../schema/manifest.ts'
import type { RunRecord } from '../schema/run.ts'
import { networkMismatches } from './network-pair.ts'

/** The two arms' records, one per launch. */
export interface FairnessPair {
  baseline: readonly RunRecord[]
  candidate: readonly RunRecord[]
}

const armLabel = (arm: string, i: number, n: number): string => (n > 1 ? `${arm} launch ${i + 1}` : arm)
/** Every launch of both arms with its label (`baseline`, or `candidate launch 2` when repeated). */
const launches = (p: FairnessPair) => [
  ...p.baseline.map((r, i) => ({ label: armLabel('baseline', i, p.baseline.length), r })),
  ...p.candidate.map((r, i) => ({ label: armLabel('candidate', i, p.candidate.length), r })),
]

function failedCells(p: FairnessPair): string[] {
  return launches(p).flatMap(({ label, r }) =>
    r.cellFailure === null ? [] : [`${label}: ${r.cellFailure.code}: ${r.cellFailure.message.split('\n')[0]}`],
  )
}

/** One fairness fact compared between the arms (docs/gates.md, "what makes a matched pair"). */
interface Check {
  name: string
  of: (r: RunRecord) => unknown
  /**
   * Why the fact could not be learned on this launch (a remote deployment's GPUs), or null: a
   * fact unknown on any launch is not compared but reported unverifiable ({@link pairUnverifiable}).
   */
  unknown?: (r: RunRecord) => string | null
}

const gpus = (m: Manifest | null) =>
  m === null ? null : m.gpus.status === 'ok' ? m.gpus.devices.map((d) => ({ name: d.name, memoryTotalMiB: d.memoryTotalMiB })) : 'absent'
const drivers = (m: Manifest | null) =>
  m === null ? null : m.gpus.status === 'ok' ? [...new Set(m.gpus.devices.map((d) => d.driverVersion))] : 'absent'

type GpuDevice = Extract<Manifest['gpus'], { status: 'ok' }>['devices'][number]

/**
 * Why a GPU fact is unknown on a launch, or null when it is known or local: the GPUs of a remote
 * deployment nothing could read, or a field its DCGM exporter does not report (`lacks` names it).
 * nvidia-smi's facts here are compared as they are, nulls included.
 */
function unknownGpuFact(r: RunRecord, missing: (d: GpuDevice) => boolean, lacks: string): string | null {
  const g = r.manifest?.gpus
  if (g === undefined) return null
  if (g.status === 'unknown') return g.reason
  if (g.status !== 'ok' || g.source === undefined) return null
  const devices = g.devices.filter(missing)
  return devices.length === 0
    ? null
    : `the ${g.source} at ${g.url ?? '?'} reports no ${lacks} for GPU ${devices.map((d) => d.index ?? '?').join(', ')}`
}

const CHECKS: Check[] = [
  { name: 'request stream sha256', of: (r) => r.plan.workload.requestStreamSha256 },
  { name: 'request count', of: (r) => r.plan.requests },
  // Conversations: the same sessions, turns, sizes, think time and history on both arms.
  { name: 'conversation', of: (r) => r.plan.workload.conversation },
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
  // The same requests aborted after the same delay on both arms (the chosen indices follow from these and the count).
  {
    name: 'cancellations',
    of: (r) =>
      r.plan.cancel === null
        ? null
        : { share: r.plan.cancel.share, afterMs: r.plan.cancel.afterMs, seed: r.plan.cancel.seed, chosen: r.plan.cancel.indices.length },
  },
  { name: 'sampling parameters', of: (r) => r.plan.workload.sampling },
  { name: 'output control', of: (r) => r.plan.workload.outputControl },
  { name: 'model revision', of: (r) => r.manifest?.model.revision ?? null },
  {
    name: 'GPU model and memory',
    of: (r) => gpus(r.manifest),
    unknown: (r) => unknownGpuFact(r, (d) => d.name === null || d.memoryTotalMiB === null, 'model name or memory total'),
  },
  {
    name: 'GPU driver',
    of: (r) => drivers(r.manifest),
    unknown: (r) => unknownGpuFact(r, (d) => d.driverVersion === null, 'DCGM_FI_DRIVER_VERSION label'),
  },
  { name: 'harness hash', of: (r) => r.manifest?.harness.hash ?? null },
  { name: 'host', of: (r) => (r.manifest === null ? null : { ...r.manifest.host, node: undefined }) },
]

const show = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v))

/** How far apart the arms' mean completion tokens may be without output control (relative). */
const OUTPUT_LENGTH_TOLERANCE = 0.05
/** How far apart the arms' failed shares may be (absolute). */
const FAILED_SHARE_TOLERANCE = 0.01

/**
 * What the arms served and produced, which identical request bytes do not guarantee: the model
 * name, the output lengths (exact under output control; else mean completion tokens within
 * `OUTPUT_LENGTH_TOLERANCE`) and the share of failed requests (within `FAILED_SHARE_TOLERANCE`).
 * Each names what it counted.
 */
function producedMismatches(p: FairnessPair): string[] {
  const out: string[] = []
  const all = launches(p)
  const served = (r: RunRecord): string => r.manifest?.model.id ?? r.target.model
  const models = [...new Set(all.map(({ r }) => served(r)))]
  if (models.length > 1) {
    const by = all.map(({ label, r }) => `${label} ${served(r)}`).join(', ')
    out.push(`served model: ${models.join(' ≠ ')} (${by})`)
  }
  const ok = (r: RunRecord) => r.requests.filter((q) => q.status === 'ok')
  const controlled = all.some(({ r }) => r.plan.workload.outputControl.mode !== 'none')
  if (controlled) {
    const inexact = all.flatMap(({ label, r }) => {
      const answered = r.requests.filter((q) => q.outputAdherence !== null)
      const exact = answered.filter((q) => q.outputAdherence === 'exact').length
      return exact === answered.length ? [] : [`${label} ${exact}/${answered.length} exact`]
    })
    if (inexact.length > 0)
      out.push(`output length: under output control every answered request must be exactly max_tokens long; ${inexact.join(', ')}`)
  } else {
    const mean = (r: RunRecord): number | null => {
      const counts = ok(r).flatMap((q) => (q.completionTokens === null ? [] : [q.completionTokens]))
      return counts.length === 0 ? null : counts.reduce((a, b) => a + b, 0) / counts.length
    }
    const means = all.map(({ label, r }) => ({ label, mean: mean(r) })).filter((m): m is { label: string; mean: number } => m.mean !== null)
    const low = Math.min(...means.map((m) => m.mean))
    const high = Math.max(...means.map((m) => m.mean))
    if (means.length > 1 && high > 0 && (high - low) / high > OUTPUT_LENGTH_TOLERANCE) {
      const by = means.map((m) => `${m.label} ${m.mean.toFixed(1)}`).join(', ')
      out.push(`output length: mean completion tokens differ by more than ${OUTPUT_LENGTH_TOLERANCE * 100}% (${by})`)
    }
  }
  // An arm whose source never recorded its failed count has no share to compare; cancelled requests are none of it.
  const shares = all.flatMap(({ label, r }) =>
    r.failed === null ? [] : [{ label, failed: r.failed, of: r.requests.length - r.cancelled }],
  )
  const share = (x: { failed: number; of: number }): number => (x.of === 0 ? 0 : x.failed / x.of)
  const spread = Math.max(...shares.map(share)) - Math.min(...shares.map(share))
  if (spread > FAILED_SHARE_TOLERANCE) {
    const by = shares.map((x) => `${x.label} ${x.failed}/${x.of}`).join(', ')
    out.push(`failed share: the arms' failed requests differ by more than ${FAILED_SHARE_TOLERANCE * 100} points (${by} failed)`)
  }
  return out
}

/**
 * The fairness facts that could not be checked, each named with the launches where it is unknown
 * and why (a remote deployment's GPUs that nothing here could read): not a mismatch, so the pair
 * is not refused for them, but never a match either. Empty when every fact was compared.
 * @example pairUnverifiable(p) // ['GPU driver: unverifiable on candidate (the dcgm-exporter at http://10.0.0.5:9400/metrics reports no DCGM_FI_DRIVER_VERSION label for GPU 0)']
 */
export function pairUnverifiable(p: FairnessPair): string[] {
  const all = launches(p)
  return CHECKS.flatMap((check) => {
    const why = all.flatMap(({ label, r }) => {
      const reason = check.unknown?.(r) ?? null
      return reason === null ? [] : [`${label} (${reason})`]
    })
    return why.length === 0 ? [] : [`${check.name}: unverifiable on ${why.join('; ')}`]
  })
}

/**
 * Every reason the pair is not matched; empty when it is. When a cell failed (its engine did not
 * start, or died), that cause is all it says: every other fact would differ because of it.
 */
export function pairMismatches(p: FairnessPair): string[] {
  const failed = failedCells(p).map((f) => `a cell failed, so nothing can be compared: ${f}`)
  if (failed.length > 0) return failed
  const out = producedMismatches(p)
  const all = [...p.baseline, ...p.candidate]
  const first = p.baseline[0] as RunRecord
  for (const check of CHECKS) {
    // Unknown on a launch: unverifiable (pairUnverifiable says so), never a guess either way.
    if (all.some((r) => (check.unknown?.(r) ?? null) !== null)) continue
    const want = check.of(first)
    const differing = all.filter((r) => !isDeepStrictEqual(check.of(r), want))
    if (differing.length > 0) {
      // What it counted: the launches that agree with the first baseline launch, of all launches.
      const agreeing = all.length - differing.length
      out.push(
        `${check.name}: baseline ${show(want)} ≠ ${show(check.of(differing[0] as RunRecord))} ` +
          `(${agreeing}/${all.length} launches as the baseline)`,
      )
    }
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
  out.push(...inputTokenMismatches(p))
  out.push(...networkMismatches(launches(p)))
  return [...new Set(out)]
}

/**
 * Same prompts, same tokens: per request, the engines' own prompt token counts; where a launch
 * is a summary-only import (no requests kept), the total input tokens. A launch whose source
 * never recorded its total cannot be checked, which is a finding, never a match.
 */
function inputTokenMismatches(p: FairnessPair): string[] {
  const all = launches(p)
  const unknown = all.filter(({ r }) => r.metrics.totalPromptTokens === null).map(({ label }) => label)
  if (unknown.length > 0)
    return [
      `input tokens: unknown for ${unknown.join(', ')} (its source recorded no total input tokens), so the arms' input tokens cannot be compared`,
    ]
  if (all.some(({ r }) => r.importedFrom?.perRequest === false)) {
    const totals = all.map(({ label, r }) => ({ label, total: r.metrics.totalPromptTokens as number }))
    if (new Set(totals.map((t) => t.total)).size === 1) return []
    return [`input tokens: the totals differ (${totals.map((t) => `${t.label} ${t.total}`).join(', ')})`]
  }
  // A live conversation's later turns carry each model's own replies: they differ by design, so
  // only its first turns, planned bytes alone, are compared.
  const live = all.some(({ r }) => r.plan.workload.conversation?.history === 'live')
  const compared = (q: RunRecord['requests'][number]): boolean => !live || q.turn === 1
  const tokens = (r: RunRecord) =>
    new Map(
      r.requests.flatMap((q) => (q.status === 'ok' && q.promptTokens !== null && compared(q) ? [[q.index, q.promptTokens] as const] : [])),
    )
  const [first, ...rest] = all.map(({ r }) => tokens(r))
  for (const other of rest) {
    const diff = [...(first ?? [])].filter(([i, n]) => other.has(i) && other.get(i) !== n)
    if (diff.length > 0) {
      const [i, n] = diff[0] as [number, number]
      return [`input tokens: ${diff.length} requests differ (request ${i}: ${n} ≠ ${other.get(i)})`]
    }
  }
  return []
}
