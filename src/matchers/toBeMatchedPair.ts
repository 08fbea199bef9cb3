import type { MatcherState } from 'vitest'
import { pairMismatches } from '../gates/fairness.ts'
import { runText } from '../record/stored-baseline.ts'
import type { RunRecord } from '../schema/run.ts'
import { recordCheck } from './decision.ts'
import { message } from './format.ts'
import { asPair, storedBaselineOf } from './subject.ts'

/**
 * Passes when both arms measured the same thing (the fairness list of docs/gates.md): the same request
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
  const stored = storedBaselineOf(p)
  recordCheck(p, 'toBeMatchedPair', pass, mismatches, this.isNot)
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
