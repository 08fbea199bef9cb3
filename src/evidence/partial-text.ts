/**
 * A partial run in words: why it did not cover the suite and what it left out, for the
 * promotion reason, the headline of the board and the page, the reporter's warning and
 * `servegate verify --require-promotable`. Pure; imports only a schema type.
 */
import type { PartialRun } from '../schema/evidence.ts'

/** At most this many names of each list in a line; the rest are counted. */
const SHOWN = 5

/** Names in a line: the first `SHOWN`, then how many more. */
function named(names: readonly string[]): string {
  const shown = names.slice(0, SHOWN).join(', ')
  return names.length > SHOWN ? `${shown} and ${names.length - SHOWN} more` : shown
}

/**
 * What a partial run did not run, in words; empty when it left out no file and no cell.
 * @example notRunText({ reasons: ['…'], filesNotRun: ['b.bench.ts'], cellsNotRun: ['beta'] })
 * // '1 spec file (b.bench.ts) and 1 cell (beta) not run'
 */
function notRunText(p: PartialRun): string {
  const files = p.filesNotRun.length === 1 ? '1 spec file' : `${p.filesNotRun.length} spec files`
  const cells = p.cellsNotRun.length === 1 ? '1 cell' : `${p.cellsNotRun.length} cells`
  const parts = [
    ...(p.filesNotRun.length > 0 ? [`${files} (${named(p.filesNotRun)})`] : []),
    ...(p.cellsNotRun.length > 0 ? [`${cells} (${named(p.cellsNotRun)})`] : []),
  ]
  return parts.length === 0 ? '' : `${parts.join(' and ')} not run`
}

/**
 * A partial run's causes and what it left out.
 * @example partialText(p) // 'only 1 of 2 spec files ran; 1 spec file (b.bench.ts) not run'
 */
export function partialText(p: PartialRun): string {
  const notRun = notRunText(p)
  return `${p.reasons.join('; ')}${notRun === '' ? '' : `; ${notRun}`}`
}

/**
 * Why a partial run's evidence is not promotable: the promotion reason `promotionOf` gives it,
 * first of all reasons.
 * @example partialReason(p) // 'the run was partial: only 1 of 2 spec files ran; 1 spec file (b.bench.ts) not run'
 */
export function partialReason(p: PartialRun): string {
  return `the run was partial: ${partialText(p)}`
}

/** What makes partial evidence promotable: run the suite whole, or merge every shard. */
export const PARTIAL_FIX = 'run the whole suite (vitest bench --run, no file list or -t), or merge every shard, to promote'

/**
 * The headline of partial evidence, for the board, the page and the reporter's summary.
 * @example partialHeadline(p) // 'Partial run, not promotable: only 1 of 2 spec files ran; 1 spec file (b.bench.ts) not run.'
 */
export function partialHeadline(p: PartialRun): string {
  return `Partial run, not promotable: ${partialText(p)}.`
}
