import type { MatcherState } from 'vitest'
import { pairMismatches, pairUnverifiable } from '../gates/fairness.ts'
import { runText } from '../record/stored-baseline.ts'
import { formatFixed, formatFixedPercent } from '../number-format.ts'
import type { RunRecord, SpecDecodeMetrics } from '../schema/run.ts'
import { recordCheck } from './decision.ts'
import { message } from './format.ts'
import { asPair, storedBaselineOf } from './subject.ts'

/** One launch's draft acceptance, as the pair's facts show it. */
function draftText(s: SpecDecodeMetrics | null): string {
  if (s === null) return 'none reported'
  const length = s.meanAcceptanceLength === null ? '' : `, mean acceptance length ${formatFixed(s.meanAcceptanceLength, 2)}`
  return `${formatFixedPercent(s.acceptanceRate)} of draft tokens accepted${length} (${s.source})`
}

/**
 * Passes when both arms measured the same thing (the fairness list of docs/gates.md): the same request
 * stream on the wire, counts, input tokens, model revision and fingerprint, GPU model, memory
 * and driver, harness, host and sampling. The message names every mismatch; GPU UUIDs are
 * reported, not required.
 */
export function toBeMatchedPair(this: MatcherState, received: unknown) {
  const p = asPair('toBeMatchedPair', received)
  const mismatches = pairMismatches(p)
  // Facts a remote arm could not learn: said, never counted either way.
  const unverifiable = pairUnverifiable(p)
  const uuids = (arm: readonly RunRecord[]) =>
    arm.flatMap((r) => (r.manifest?.gpus.status === 'ok' ? r.manifest.gpus.devices.map((d) => d.uuid ?? '?') : [])).join(', ') || 'none'
  // Speculative decoding is the engines' own business, not a fairness fact: reported beside them.
  const drafting = [...p.baseline, ...p.candidate].some((r) => r.metrics.specDecode !== null)
  const drafts = (arm: readonly RunRecord[]) => arm.map((r) => draftText(r.metrics.specDecode)).join('; ')
  // A live conversation sends each arm's own replies back: what differs by design is said, not counted.
  const live = [...p.baseline, ...p.candidate].some((r) => r.plan.workload.conversation?.history === 'live')
  const pass = mismatches.length === 0
  const stored = storedBaselineOf(p)
  recordCheck(p, 'toBeMatchedPair', pass, mismatches, this.isNot, unverifiable)
  return {
    pass,
    message: () =>
      message(
        this,
        'toBeMatchedPair',
        [['Expected', this.isNot ? 'the pair to differ in some fairness fact' : 'every fairness fact equal on both arms']],
        [
          [
            'Received',
            pass
              ? `a matched pair (${p.baseline.length}+${p.candidate.length} launches)`
              : `${mismatches.length} mismatch${mismatches.length === 1 ? '' : 'es'}`,
          ],
          ['GPU UUIDs', `baseline ${uuids(p.baseline)}; candidate ${uuids(p.candidate)} (reported, not required)`],
          ...(unverifiable.length === 0
            ? []
            : ([['Unverifiable', `${unverifiable.join('; ')} (not compared: unknown, never guessed)`]] as Array<[string, string]>)),
          ...(live
            ? ([
                [
                  'History',
                  'live: each arm sends its own replies back, so assistant turns differ by design; ' +
                    'compared on the planned user turns (request-stream hash) and the first turns’ prompt tokens',
                ],
              ] as Array<[string, string]>)
            : []),
          ...(drafting
            ? ([['Draft acceptance', `baseline ${drafts(p.baseline)}; candidate ${drafts(p.candidate)} (reported, not required)`]] as Array<
                [string, string]
              >)
            : []),
          ...(stored === null
            ? []
            : ([['Baseline', `the stored record ${stored.file} (${runText(stored.record)}), not measured in this run`]] as Array<
                [string, string]
              >)),
        ],
        mismatches.map((m) => `- ${m}`),
      ),
  }
}
