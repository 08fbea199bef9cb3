import { type CachedPromptFigures, cachedPromptFigures } from '../metrics/cached-prompt.ts'
import { formatFixedPercent } from '../number-format.ts'
import type { GateDecision } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import { type ArmInput, launchesOf, turnsText } from './arms.ts'
import { parseOptions, ReuseCacheGateOptions, type TurnRange } from './gate-options.ts'

/** What the prefix-cache check reads of a run record: its requests. */
type ReuseCacheRecord = Pick<RunRecord, 'requests'>

/** What the prefix-cache check judges: one cell's launches, or a pair's two arms. */
export type ReuseCacheInput = { cell: readonly ReuseCacheRecord[] } | { baseline: ArmInput; candidate: ArmInput }

/** One judged launch: where it sits, and what its engine reported over the judged turns. */
interface JudgedLaunch {
  label: string
  arm: 'baseline' | 'candidate' | 'cell'
  figures: CachedPromptFigures
}

/** The launches judged, labelled as messages name them (`cell`, `launch 2`, `baseline`, `candidate launch 2`). */
function judgedLaunches(
  input: ReuseCacheInput,
  arm: 'baseline' | 'candidate' | undefined,
): Array<{ label: string; arm: JudgedLaunch['arm']; record: ReuseCacheRecord }> {
  const label = (name: string, i: number, n: number) => (n > 1 ? `${name} launch ${i + 1}` : name)
  if ('cell' in input) {
    if (arm !== undefined) throw new TypeError(`toReuseCache: arm '${arm}' names an arm of a pair, but this is one cell; remove arm`)
    return input.cell.map((record, i) => ({ label: input.cell.length > 1 ? `launch ${i + 1}` : 'cell', arm: 'cell', record }))
  }
  const arms = arm === undefined ? (['baseline', 'candidate'] as const) : [arm]
  return arms.flatMap((name) => {
    const launches = launchesOf(input[name])
    return launches.map((record, i) => ({ label: label(name, i, launches.length), arm: name, record }))
  })
}

/**
 * The turns judged: as given, else turns ≥ 2 where the records are conversations (turn 1 opens a
 * session: only a shared system prompt can hit), else all of them (undefined).
 * @throws TypeError when turns are given for records that are no conversation
 */
function judgedTurns(records: readonly ReuseCacheRecord[], turns: TurnRange | undefined): TurnRange | undefined {
  const conversation = records.some((r) => r.requests.some((q) => q.turn !== null))
  if (turns !== undefined && !conversation) {
    throw new TypeError('toReuseCache: turns needs conversation records (requests with a turn); remove turns or measure a conversation')
  }
  return turns ?? (conversation ? { from: 2 } : undefined)
}

function inTurns(turn: number | null, turns: TurnRange | undefined): boolean {
  if (turns === undefined) return true
  return turn !== null && turn >= turns.from && (turns.to === undefined || turn <= turns.to)
}

/** One launch's figures in words: `candidate 81.2% (3,248 of 4,000 prompt tokens; 24 of 24 requests reported)`. */
function figuresText(j: JudgedLaunch): string {
  const f = j.figures
  if (f.cachedPromptTokens === null) return `${j.label} unknown (${f.requests} ok request(s), none reported cached tokens)`
  return (
    `${j.label} ${formatFixedPercent(f.share)} (${f.cachedPromptTokens.toLocaleString('en-US')} of ` +
    `${f.promptTokens.toLocaleString('en-US')} prompt tokens; ${f.reported} of ${f.requests} requests reported)`
  )
}

/**
 * The prefix-cache check: the share of prompt tokens the engine reported serving from its prefix
 * cache (`cachedPromptTokens` over `promptTokens` of the ok requests) is at least `atLeast` on
 * every judged launch (a pair: both arms unless `arm` names one). By default a conversation is
 * judged over turns ≥ 2, anything else over every request. A launch whose engine reported no cached
 * tokens fails with the reason: unknown is never a pass. A check, never inconclusive: the estimate
 * is the lowest share judged.
 * @example reuseCacheGate({ cell: [record] }, { atLeast: 0.5 })
 * @throws TypeError for bad options, `arm` on one cell, or `turns` on records that are no conversation
 */
export function reuseCacheGate(input: ReuseCacheInput, options: ReuseCacheGateOptions): GateDecision {
  const o = parseOptions('toReuseCache', ReuseCacheGateOptions, options)
  const launches = judgedLaunches(input, o.arm)
  if (launches.length === 0) throw new TypeError('toReuseCache: needs at least one run record')
  const turns = judgedTurns(
    launches.map((l) => l.record),
    o.turns,
  )
  const judged: JudgedLaunch[] = launches.map(({ label, arm, record }) => ({
    label,
    arm,
    figures: cachedPromptFigures(record.requests.filter((r) => inTurns(r.turn, turns))),
  }))
  const warnings: string[] = []
  for (const j of judged) {
    const reason = j.figures.unknownReason
    if (reason !== null) warnings.push(`${j.label}: cached prompt tokens unknown: ${reason}`)
  }
  const shares = judged.map((j) => j.figures.share)
  const known = shares.every((s): s is number => s !== null)
  const lowest = known ? Math.min(...shares) : null
  const passed = lowest !== null && lowest >= o.atLeast
  const count = (arm: JudgedLaunch['arm'][]) => judged.filter((j) => arm.includes(j.arm)).reduce((n, j) => n + j.figures.requests, 0)
  const where = o.arm !== undefined ? `the ${o.arm}` : 'cell' in input ? 'every launch' : 'both arms (every launch)'
  return {
    gate: 'toReuseCache',
    outcome: passed ? 'pass' : 'fail',
    kind: 'check',
    metric: `cached share of prompt tokens${turns === undefined ? '' : turnsText(turns).replace(/^; over/, ',')}`,
    effect: {
      estimate: lowest,
      low: null,
      high: null,
      unit: 'fraction',
      confidence: null,
      method: `engine-reported cached prompt tokens ÷ prompt tokens of the ok requests, the lowest launch: ${judged.map(figuresText).join('; ')}`,
    },
    samples: { baseline: count(['baseline']), candidate: count(['candidate', 'cell']), paired: 0 },
    rule:
      `passes when the engine reports at least ${formatFixedPercent(o.atLeast)} of the prompt tokens as served from its ` +
      `prefix cache on ${where}${turnsText(turns)}; a share the engine did not report fails`,
    moreRequestsHint: null,
    decideHint: null,
    warnings,
  }
}
