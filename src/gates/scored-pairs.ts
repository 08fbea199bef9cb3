import type { PairedTable } from '../stats/tests.ts'
import { type GateRecord, type OkRequest, pairByIndex, valuesByIndex } from './arms.ts'

/** One scored request: right or not, and how long its reply ran. */
interface Scored {
  correct: boolean
  completionTokens: number | null
}

const scoredOf = (r: OkRequest): Scored | null =>
  r.score === null ? null : { correct: r.score.correct, completionTokens: r.completionTokens }

/** Per question of the dataset, the paired requests that asked it and how many each arm got right. */
interface QuestionTally {
  rows: number
  asked: Float64Array
  baseline: Float64Array
  candidate: Float64Array
}

/** Per distinct question asked: each arm's share right over its paired requests, and their difference. */
export interface QuestionShares {
  baseline: number[]
  candidate: number[]
  /** candidate − baseline share, per question. */
  differences: number[]
}

/** The mean output lengths of the paired requests that report them. */
export interface OutputLengths {
  /** candidate ÷ baseline total completion tokens, − 1. */
  gap: number
  candidateMeanTokens: number
  baselineMeanTokens: number
  /** Paired requests counted. */
  questions: number
}

/**
 * The requests scored on both arms of an accuracy gate, paired by index, launch by launch (the
 * i-th launch of each arm with the other's i-th): the paired table, each arm's scored count, the
 * output lengths, and with a dataset of `rows` distinct questions each question's tally (request
 * `index` asks question `index % rows`).
 * @example const pairs = new ScoredPairs(null); pairs.addLaunch(baseline, candidate); pairs.table // { both: 160, firstOnly: 0, … }
 */
export class ScoredPairs {
  /** First = candidate, second = baseline: the difference is candidate − baseline. */
  readonly table: PairedTable = { both: 0, firstOnly: 0, secondOnly: 0, neither: 0 }
  readonly #questions: QuestionTally | null
  #scoredBaseline = 0
  #scoredCandidate = 0
  #tokensBaseline = 0
  #tokensCandidate = 0
  #lengthPairs = 0

  /** @param rows the dataset's distinct questions; null without a dataset */
  constructor(rows: number | null) {
    this.#questions =
      rows === null ? null : { rows, asked: new Float64Array(rows), baseline: new Float64Array(rows), candidate: new Float64Array(rows) }
  }

  /** Requests paired so far. */
  get paired(): number {
    const t = this.table
    return t.both + t.firstOnly + t.secondOnly + t.neither
  }

  /** Questions repeat: more requests paired than the dataset has distinct questions, so the question is the unit. */
  get clustered(): boolean {
    return this.#questions !== null && this.paired > this.#questions.rows
  }

  /** Scored requests of each arm, paired or not, and those paired. */
  samples(): { baseline: number; candidate: number; paired: number } {
    return { baseline: this.#scoredBaseline, candidate: this.#scoredCandidate, paired: this.paired }
  }

  /** Pairs one launch of each arm. */
  addLaunch(baseline: GateRecord, candidate: GateRecord): void {
    const b = valuesByIndex(baseline, scoredOf)
    const c = valuesByIndex(candidate, scoredOf)
    this.#scoredBaseline += b.size
    this.#scoredCandidate += c.size
    const paired = pairByIndex(b, c)
    paired.indices.forEach((index, k) => this.#add(index, paired.baseline[k] as Scored, paired.candidate[k] as Scored))
  }

  /** Per distinct question asked, each arm's share right and their difference; empty without a dataset. */
  shares(): QuestionShares {
    const shares: QuestionShares = { baseline: [], candidate: [], differences: [] }
    const t = this.#questions
    t?.asked.forEach((asked, q) => {
      if (asked === 0) return
      const b = (t.baseline[q] as number) / asked
      const c = (t.candidate[q] as number) / asked
      shares.baseline.push(b)
      shares.candidate.push(c)
      shares.differences.push(c - b)
    })
    return shares
  }

  /** The output lengths of the pairs whose replies both report one; null when none does, or the baseline's are all 0. */
  outputLengths(): OutputLengths | null {
    if (this.#lengthPairs === 0 || this.#tokensBaseline <= 0) return null
    return {
      gap: this.#tokensCandidate / this.#tokensBaseline - 1,
      candidateMeanTokens: this.#tokensCandidate / this.#lengthPairs,
      baselineMeanTokens: this.#tokensBaseline / this.#lengthPairs,
      questions: this.#lengthPairs,
    }
  }

  #add(index: number, b: Scored, c: Scored): void {
    const t = this.#questions
    if (t !== null) {
      const q = index % t.rows
      t.asked[q] = (t.asked[q] as number) + 1
      if (b.correct) t.baseline[q] = (t.baseline[q] as number) + 1
      if (c.correct) t.candidate[q] = (t.candidate[q] as number) + 1
    }
    if (c.correct && b.correct) this.table.both++
    else if (c.correct) this.table.firstOnly++
    else if (b.correct) this.table.secondOnly++
    else this.table.neither++
    if (b.completionTokens !== null && c.completionTokens !== null) {
      this.#tokensBaseline += b.completionTokens
      this.#tokensCandidate += c.completionTokens
      this.#lengthPairs++
    }
  }
}
