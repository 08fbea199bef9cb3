/**
 * A gate against a stored baseline: the pair checks run before any verdict, since nothing else
 * vouches that a record from another run measured the same thing, and the decision says where the
 * baseline came from.
 */
import { ServegateError } from '../errors.ts'
import { pairMismatches } from '../gates/fairness.ts'
import { runText, storedBaselineFloor, storedBaselineWarning } from '../record/stored-baseline.ts'
import type { GateDecision, GateName } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import type { PairResult } from '../schema/results.ts'
import { recordCheck, recordStoredBaseline } from './decision.ts'
import { storedBaselineOf } from './subject.ts'

/**
 * The decision function of a pair gate. For a pair measured in this run, `decide` as it is. For a
 * stored baseline (`{ baseline: await storedBaseline(path), candidate }`), the pair checks first:
 * a mismatch is recorded as a failed `toBeMatchedPair` check on the cell and thrown, naming every
 * mismatch (a refusal, so `.not` cannot pass it); a matched pair's decision carries a warning that
 * the baseline was not measured in this run, with its file, run id and start time and, for a
 * timing gate (see `storedBaselineFloor`), that only the launch-noise floor covers the drift.
 * @example gateResult(this, gate, p, againstStoredBaseline(gate, p, () => winGate(p, o), o), o)
 */
export function againstStoredBaseline(
  matcher: GateName,
  pair: PairResult,
  decide: () => GateDecision,
  options: object,
): () => GateDecision {
  const stored = storedBaselineOf(pair)
  if (stored === null) return decide
  return () => {
    const candidate = pair.candidate[0] as RunRecord
    // The evidence keeps the stored record, so verify can decide this verdict again.
    recordStoredBaseline(stored)
    const mismatches = pairMismatches(pair)
    if (mismatches.length > 0) {
      recordCheck(pair, 'toBeMatchedPair', false, mismatches)
      throw new ServegateError(
        'CONFIG_INVALID',
        `${matcher}: the stored baseline ${stored.file} (${runText(stored.record)}) and the cell ${pair.id} ` +
          `(${runText(candidate)}) are not a matched pair, so no verdict is given:\n` +
          mismatches.map((m) => `  - ${m}\n`).join('') +
          'Store a baseline measured with the same workload, model, GPU and servegate version (this suite on the main ' +
          'branch), or measure both arms in this run with pair({ baseline, candidate }).',
      )
    }
    const d = decide()
    return {
      ...d,
      // One stored launch cannot be repeated: launches would not decide it.
      decideHint: d.decideHint?.set.repeats === undefined ? d.decideHint : null,
      warnings: [...d.warnings, storedBaselineWarning(stored, candidate, storedBaselineFloor(matcher, options))],
    }
  }
}
