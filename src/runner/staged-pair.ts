import { z } from 'zod'
import { MIN_PAIRED_REQUESTS } from '../gates/arms.ts'
import { ServiceMetric, WinGateOptions } from '../gates/gate-options.ts'
import { lookCounts, winGate } from '../gates/win.ts'
import type { CellStages } from './measure-cell.ts'
import type { RequestRecord, SequentialPlan } from '../schema/run.ts'

/**
 * Early stopping of a pair: both arms are measured in stages ending at the looks, taking turns
 * A B B A, and the pair stops at the first look where every stopping gate has decided.
 */
export const StopEarly = z.object({
  /** Request counts at which to look, e.g. [16, 32, 64]; the pair's `requests` is always the last look. */
  looks: z.array(z.int().min(MIN_PAIRED_REQUESTS)).min(1),
  /** The win gates that stop the pair once every one of them passed or failed; their matchers then read the same design. */
  gates: z
    .array(WinGateOptions)
    .min(1)
    .refine((gates) => gates.every((g) => g.looks === null), {
      message: "set `looks` on stopEarly, not on its gates: the gates take the pair's design",
    })
    .refine(
      (gates) =>
        gates.every((g) => !ServiceMetric.safeParse(g.metric ?? (g.gate === 'toWinThroughput' ? 'outputThroughputTokPerS' : null)).success),
      {
        message:
          "toWinThroughput judges the cell's aggregate output tok/s, one figure per cell, which has no looks: " +
          "stop on toWinDecode or toWinPrefill, or give it metric: 'throughputTokPerS' (the per-request rate)",
      },
    ),
})
export type StopEarly = z.input<typeof StopEarly>
export type ResolvedStopEarly = z.infer<typeof StopEarly>

/**
 * Validates an early-stopping design and fills its gates' defaults; the error names the field.
 * @throws TypeError
 */
export function resolveStopEarly(input: StopEarly): ResolvedStopEarly {
  const parsed = StopEarly.safeParse(input)
  if (!parsed.success) throw new TypeError(`pair: invalid stopEarly\n${z.prettifyError(parsed.error)}`)
  return parsed.data
}

type Arm = 'baseline' | 'candidate'

/**
 * Runs the two arms of a sequential pair in turns: stage s of both arms, baseline first on even
 * stages and candidate first on odd ones (A B B A), then the stopping gates judge the paired
 * requests so far with the design's α spending. An arm that cannot go on (its engine exited,
 * the run was aborted, its cell threw) stops the pair after the stage both arms finished.
 */
export class StagedPair {
  readonly ends: number[]
  private readonly gates: Array<z.infer<typeof WinGateOptions>>
  private readonly plannedRequests: number
  private readonly order: Array<{ arm: Arm; stage: number }> = []
  private position = 0
  private readonly waiting = new Map<string, { stage: number; go: (run: boolean) => void }>()
  private readonly left = new Set<Arm>()
  private readonly stagesDone: Record<Arm, number> = { baseline: 0, candidate: 0 }
  private readonly records: Record<Arm, RequestRecord[]> = { baseline: [], candidate: [] }
  private stop: { at: number; reason: string } | null = null
  private reached = 0

  constructor(stopEarly: StopEarly, plannedRequests: number) {
    const design = resolveStopEarly(stopEarly)
    this.gates = design.gates
    this.plannedRequests = plannedRequests
    this.ends = lookCounts({ looks: design.looks, plannedRequests })
    this.ends.forEach((_, stage) =>
      this.order.push(
        ...(stage % 2 === 0 ? ['baseline', 'candidate'] : ['candidate', 'baseline']).map((arm) => ({ arm: arm as Arm, stage })),
      ),
    )
  }

  /** The stage hooks one arm's cell measures with. */
  stagesFor(arm: Arm): CellStages {
    return {
      ends: this.ends,
      turn: (stage) => this.turn(arm, stage),
      done: (stage, records, broken) => this.done(arm, stage, records, broken),
      abandon: () => this.leave(arm),
    }
  }

  /** An arm's measurement settled (a record, a failed record, or a throw): it takes no more turns. */
  leave(arm: Arm): void {
    this.left.add(arm)
    if (this.stop === null && this.stagesDone[arm] < this.ends.length) {
      this.stop = {
        at: this.reached,
        reason: `the ${arm} arm ended after ${this.stagesDone[arm]} of ${this.ends.length} stages (see its cellFailure)`,
      }
    }
    this.advance()
  }

  private turn(arm: Arm, stage: number): Promise<boolean> {
    return new Promise((resolve) => {
      this.waiting.set(`${arm}:${stage}`, { stage, go: resolve })
      this.advance()
    })
  }

  private done(arm: Arm, stage: number, records: readonly RequestRecord[], broken: boolean): void {
    this.records[arm] = [...records]
    this.stagesDone[arm] = stage + 1
    this.position++
    if (this.stagesDone.baseline === stage + 1 && this.stagesDone.candidate === stage + 1) this.reached = this.ends[stage] as number
    if (broken && this.stop === null)
      this.stop = {
        at: this.reached,
        reason: `the ${arm} arm cannot go on after stage ${stage + 1} (its engine exited or the run was aborted)`,
      }
    else if (this.stop === null && this.reached === this.ends[stage] && stage < this.ends.length - 1) this.judge(stage)
    this.advance()
  }

  /** After both arms finished a stage: stop when every stopping gate decided. */
  private judge(stage: number): void {
    const design = this.plan()
    const decisions = this.gates.map((g) =>
      winGate(
        {
          baseline: { requests: this.records.baseline, plan: { sequential: design } },
          candidate: { requests: this.records.candidate, plan: { sequential: design } },
        },
        g,
      ),
    )
    if (decisions.every((d) => d.outcome !== 'inconclusive')) {
      const verdicts = decisions.map((d) => `${d.gate} ${d.outcome}`).join(', ')
      this.stop = {
        at: this.reached,
        reason: `every stopping gate decided at look ${stage + 1} of ${this.ends.length} (${this.reached} requests): ${verdicts}`,
      }
    }
  }

  /** Grants the next turn if its arm is waiting; once stopped, releases every later stage unrun (first stages still run). */
  private advance(): void {
    if (this.stop !== null) {
      for (const [key, w] of this.waiting) {
        if (w.stage === 0) continue
        this.waiting.delete(key)
        w.go(false)
      }
    }
    while (this.position < this.order.length) {
      const next = this.order[this.position] as { arm: Arm; stage: number }
      if (this.left.has(next.arm) || (this.stop !== null && next.stage > 0)) {
        this.position++
        continue
      }
      const key = `${next.arm}:${next.stage}`
      const w = this.waiting.get(key)
      if (w !== undefined) {
        this.waiting.delete(key)
        w.go(true)
      }
      return
    }
  }

  /** The design and where the pair stopped; final once both arms left. */
  plan(): SequentialPlan {
    return {
      looks: this.ends,
      plannedRequests: this.plannedRequests,
      stopWhen: this.gates.map((g) => ({ gate: g.gate, options: { ...g } })),
      stoppedAt: this.stop?.at ?? this.reached,
      reason:
        this.stop?.reason ??
        (this.reached >= this.plannedRequests ? `ran every stage: no look before the last decided every stopping gate` : 'running'),
    }
  }
}
