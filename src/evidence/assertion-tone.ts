/**
 * What each assertion, cell and finding of the evidence came to, as a reader should take it: red
 * only for what keeps the evidence from promotion. A `.not` assertion that held is expected
 * (`expected non-win ✓`), not a failure; an optional cell that failed, or an inconclusive hold that
 * passes by policy, is worth a look but blocks nothing. The page, the board, the PR comment and the
 * at-a-glance lines all draw from here, so they say the same.
 */
import type { EvidenceCell, EvidenceIndex, Finding, GateEntry, PairCheck } from '../schema/evidence.ts'
import type { CheckName, GateName } from '../schema/gate.ts'
import { expectedText } from '../gates/expected-text.ts'

/**
 * `blocks`: keeps the evidence from promotion (red); `expected`: a `.not` assertion that held
 * (neutral); `pass`: held as a plain assertion (green); `note`: neither, worth reading (amber).
 */
export type Tone = 'blocks' | 'expected' | 'pass' | 'note'

/** `expected non-win ✓` for a `.not` that held (the matcher did not pass, as asserted); null otherwise. */
function expectedOf(name: GateName | CheckName, a: { isNot: boolean; passed: boolean }): string | null {
  // One wording with the UI annotation and the terminal (src/gates/expected-text.ts).
  return a.isNot && !a.passed ? expectedText(name) : null
}

/**
 * A gate's `.not` that held, in words: `expected non-win ✓` (a win gate), `expected SLO miss ✓`…;
 * null when the gate was not asserted with `.not`, or its `.not` did not hold.
 * @example gateExpected(g) // 'expected non-win ✓'
 */
export function gateExpected(g: GateEntry): string | null {
  return expectedOf(g.decision.gate, g)
}

/**
 * A check's `.not` that held, in words: `expected mismatch ✓` for `.not.toBeMatchedPair`…; null otherwise.
 * @example checkExpected(k) // 'expected mismatch ✓'
 */
export function checkExpected(k: PairCheck): string | null {
  return expectedOf(k.check, k)
}

/** A gate: its failed test blocks promotion; a `.not` that held is expected; a pass passes; the rest pass by policy. */
export function gateTone(g: GateEntry): Tone {
  if (!g.testPassed) return 'blocks'
  if (gateExpected(g) !== null) return 'expected'
  return g.decision.outcome === 'pass' ? 'pass' : 'note'
}

/** A check: its failed test blocks promotion; a `.not` that held is expected. */
export function checkTone(k: PairCheck): Tone {
  if (!k.testPassed) return 'blocks'
  if (checkExpected(k) !== null) return 'expected'
  return k.passed ? 'pass' : 'note'
}

/** The held `.not.toBeMatchedPair` that explains why a cell is not a matched pair, or null. */
function expectedMismatch(c: EvidenceCell): string | null {
  if (c.disposition !== 'failed' || !(c.reason ?? '').startsWith('not a matched pair')) return null
  for (const k of c.checks) if (k.check === 'toBeMatchedPair' && checkExpected(k) !== null) return checkExpected(k)
  return null
}

/** A cell: accepted passes; a required cell not accepted blocks; an optional one is expected (a held `.not`) or a note. */
export function cellTone(c: EvidenceCell): Tone {
  if (c.disposition === 'accepted') return 'pass'
  if (c.required) return 'blocks'
  return expectedMismatch(c) === null ? 'note' : 'expected'
}

/**
 * A cell's disposition in words: a required cell's as it is (`accepted`, `failed`…); an optional
 * cell's with why it blocks nothing: `accepted (optional)`, `failed: expected mismatch ✓ (optional)`,
 * `failed (optional: does not block)`.
 */
export function dispositionText(c: EvidenceCell): string {
  if (c.required) return c.disposition
  if (c.disposition === 'accepted') return 'accepted (optional)'
  const expected = expectedMismatch(c)
  return expected === null ? `${c.disposition} (optional: does not block)` : `${c.disposition}: ${expected} (optional)`
}

/** How a finding reads: its tone, and its label (the finding's kind, or what a held `.not` expected). */
export interface FindingView {
  tone: Tone
  label: string
}

/** The gates and checks of a finding's cell that it is about: its message starts with their name. */
function subjectsOf(index: EvidenceIndex, f: Finding): Array<{ tone: Tone; expected: string | null }> {
  const about = (name: string) => f.message.startsWith(`${name} `) || f.message.startsWith(`${name}:`)
  const gates = index.gates
    .filter((g) => g.cell === f.cell && about(g.decision.gate))
    .map((g) => ({ tone: gateTone(g), expected: gateExpected(g) }))
  const checks = (index.cells.find((c) => c.id === f.cell)?.checks ?? [])
    .filter((k) => about(k.check))
    .map((k) => ({ tone: checkTone(k), expected: checkExpected(k) }))
  return [...gates, ...checks]
}

/**
 * How to show a finding: a non-win, regression, inconclusive or failed check takes the tone of its
 * gates or checks (all expected: labelled with what the `.not` expected); a cell not accepted, the
 * cell's tone; anything else (harness-limited, host noise…) is a note.
 * @example findingView(index, { kind: 'non-win', cell: 'c4', message: 'toWinDecode fail: decodeTokPerS' })
 * // { tone: 'expected', label: 'expected non-win ✓' } when `.not.toWinDecode` held on c4
 */
export function findingView(index: EvidenceIndex, f: Finding): FindingView {
  if (f.kind === 'cell-not-accepted') {
    const cell = index.cells.find((c) => c.id === f.cell)
    if (cell === undefined) return { tone: 'note', label: f.kind }
    const tone = cellTone(cell)
    if (tone === 'expected') return { tone, label: expectedMismatch(cell) as string }
    return { tone, label: tone === 'note' ? `${f.kind} (optional: does not block)` : f.kind }
  }
  if (!['non-win', 'regression', 'inconclusive', 'check-failed'].includes(f.kind)) return { tone: 'note', label: f.kind }
  const subjects = subjectsOf(index, f)
  if (subjects.length === 0) return { tone: 'note', label: f.kind }
  if (subjects.some((s) => s.tone === 'blocks')) return { tone: 'blocks', label: f.kind }
  const expected = subjects.map((s) => s.expected)
  if (expected.every((e) => e !== null)) return { tone: 'expected', label: [...new Set(expected)].join(', ') }
  return { tone: 'note', label: f.kind }
}

/** Gates by outcome with the `.not` assertions that held counted apart (`expected`, each with its words). */
export interface GateCounts {
  pass: number
  fail: number
  inconclusive: number
  /** e.g. `[['expected non-win ✓', 2]]`, in first-seen order. */
  expected: Array<[string, number]>
}

/**
 * The index's gates by outcome, a held `.not` counted as expected rather than by its outcome, so a
 * `fail` always means a gate that did not hold. (`index.statistics.gates` counts raw outcomes.)
 */
export function gateCounts(index: EvidenceIndex): GateCounts {
  const counts: GateCounts = { pass: 0, fail: 0, inconclusive: 0, expected: [] }
  const expected = new Map<string, number>()
  for (const g of index.gates) {
    const words = gateExpected(g)
    if (words === null) counts[g.decision.outcome]++
    else expected.set(words, (expected.get(words) ?? 0) + 1)
  }
  counts.expected = [...expected]
  return counts
}

/** The expected counts in words: `2 expected non-win ✓, 1 expected SLO miss ✓`; '' when none. */
export function expectedCountText(expected: GateCounts['expected']): string {
  return expected.map(([words, n]) => `${n} ${words}`).join(', ')
}
