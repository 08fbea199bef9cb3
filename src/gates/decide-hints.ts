/**
 * What an undecided gate says would decide it, in the cell options' own names: more requests, or
 * more launches, sized from the interval it has, or (the harness the bottleneck) the harness
 * setting that would have passed; and the launch-level verdict of a superiority gate, shared by the
 * win gates.
 */
import type { DecideHint, DecideSettings, GateDecision } from '../schema/gate.ts'
import type { HarnessHealth } from '../schema/run.ts'
import { formatFixed, formatPercent } from '../number-format.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import { launchLevelInterval } from './interval.ts'

/** The largest `moreRequestsHint` a gate gives. */
export const MAX_REQUESTS_HINT = 10_000

/**
 * Paired requests per arm at which the interval's half-width z·√(s²/n + v) would fall below the
 * gap |log estimate − log threshold|: n = s² / ((gap/z)² − v). Null when the gap is 0 or the
 * launch-noise floor v alone is wider; capped at MAX_REQUESTS_HINT; always more than now.
 */
export function requestsHint(gap: number, sd: number, confidence: number, launchVariance: number, current: number): number | null {
  if (gap === 0 || !Number.isFinite(gap)) return null
  const z = normalQuantile(1 - (1 - confidence) / 2)
  const room = (gap / z) ** 2 - launchVariance
  if (!(room > 0)) return null
  const needed = Math.ceil((sd * sd) / room)
  return Math.min(MAX_REQUESTS_HINT, Math.max(current + 1, needed))
}

/** The most launches per arm a `repeats` hint names. */
const MAX_REPEATS_HINT = 64

/**
 * Launches per arm (at least 2, and more than now) at which the launch-level t-interval's
 * half-width would fall below the gap |log estimate − log threshold|: t(2r − 2)·sd·√(2/r) for two
 * arms, t(r − 1)·sd/√r for one against a fixed bound, `sd` being one launch's sd of the log
 * statistic. Null when the gap or the sd is 0, or past MAX_REPEATS_HINT launches.
 */
export function repeatsHint(gap: number, sd: number, confidence: number, current: number, arms: 1 | 2 = 2): number | null {
  if (!(gap > 0) || !(sd > 0) || !Number.isFinite(gap)) return null
  for (let r = Math.max(2, current + 1); r <= MAX_REPEATS_HINT; r++) {
    if (studentTQuantile(1 - (1 - confidence) / 2, arms * (r - 1)) * sd * Math.sqrt(arms / r) < gap) return r
  }
  return null
}

/**
 * What would decide a single launch's undecided interval of a log statistic: more requests
 * (`requestsHint`) where they could narrow it past the gap, else, the launch-noise floor wider
 * than the gap, repeated launches (`repeatsHint` at the floor plus one launch's request-level
 * spread). `requests` is the `moreRequestsHint`.
 */
export function singleLaunchHint(p: {
  /** log estimate − log threshold. */
  gap: number
  /** The per-request sd of the log statistic (its equivalent, for a bootstrap interval). */
  sd: number
  confidence: number
  launchNoise: number
  /** The requests it rests on, and what they are, e.g. `paired requests per arm`. */
  n: number
  unit: string
  /** 2 for a comparison of two arms, 1 for one arm against a fixed bound. @default 2 */
  arms?: 1 | 2
}): { requests: number | null; hint: DecideHint | null } {
  const arms = p.arms ?? 2
  const launchVariance = arms * p.launchNoise ** 2
  const requests = requestsHint(p.gap, p.sd, p.confidence, launchVariance, p.n)
  if (requests !== null) return { requests, hint: decideHint([requestsSetting(requests, p.n, p.unit)]) }
  if (!(launchVariance > 0)) return { requests, hint: null }
  const launchSd = Math.sqrt((launchVariance + (p.sd * p.sd) / p.n) / arms)
  const repeats = repeatsHint(Math.abs(p.gap), launchSd, p.confidence, 1, arms)
  return { requests, hint: repeats === null ? null : decideHint([repeatsSetting(repeats, { launchNoise: p.launchNoise })]) }
}

/** One option an undecided gate names: its value, and why, with the figures. */
export interface DecideSetting {
  option: keyof DecideSettings
  value: number
  why: string
}

/**
 * The hint of settings to make together, null when there is none: `set` spreads into the cell's
 * options, `text` says the same in one line.
 * @example decideHint([{ option: 'requests', value: 49, why: '…' }])
 * // { set: { requests: 49 }, text: 'to decide it, set requests: 49 (…)' }
 */
export function decideHint(settings: readonly DecideSetting[]): DecideHint | null {
  if (settings.length === 0) return null
  const set: DecideSettings = Object.fromEntries(settings.map((s) => [s.option, s.value]))
  const parts = settings.map((s) => `${s.option}: ${s.value} (${s.why})`)
  const listed = parts.length === 1 ? parts[0] : `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)}`
  return { set, text: `to decide it, set ${listed}` }
}

/** More requests, from the spread seen over `current` of them (`unit` says what they are, e.g. `paired requests per arm`). */
function requestsSetting(requests: number, current: number, unit: string): DecideSetting {
  return { option: 'requests', value: requests, why: `about ${requests} ${unit} would likely decide it at the spread seen over ${current}` }
}

/** Questions scored on both arms for an accuracy gate, each one request per arm. */
export function questionsSetting(questions: number, paired: number): DecideSetting {
  return {
    option: 'requests',
    value: questions,
    why: `about ${questions} questions scored on both arms would likely decide it; now ${paired}`,
  }
}

/** Too few paired requests for any interval: at least `requests` paired on both arms. */
export function tooFewSetting(requests: number, paired: number): DecideSetting {
  return {
    option: 'requests',
    value: requests,
    why: `only ${paired} paired request(s) had a value on both arms; an interval needs ${requests}`,
  }
}

/** Too few launches for a launch-level test: two per arm. */
export function tooFewLaunchesSetting(): DecideSetting {
  return { option: 'repeats', value: 2, why: 'the launch-level test needs at least two launches with values per arm' }
}

/** Launches per arm, alternated, when the launch-noise floor (or the launches' own spread) is what keeps a gate undecided. */
export function repeatsSetting(repeats: number, p: { launchNoise: number } | { launchSd: number }): DecideSetting {
  const why =
    'launchNoise' in p
      ? `more requests cannot narrow the launch-noise floor of ${formatPercent(p.launchNoise)} per launch; ` +
        `about ${repeats} launches per arm, alternated A B B A, would likely decide it`
      : `about ${repeats} launches per arm would likely decide it (launch-to-launch sd ${formatPercent(p.launchSd)})`
  return { option: 'repeats', value: repeats, why }
}

/** The smallest n whose Wilson lower bound, every request good, reaches `required`: below it no share can pass. */
function requestsToShow(required: number, z: number): number {
  // n/(n + z²) ≥ required ⇔ n ≥ z²·required/(1 − required).
  return required >= 1 ? Infinity : Math.max(1, Math.ceil((z * z * required) / (1 - required) - 1e-9))
}

/**
 * The requests an SLO share needs: `requests` that would likely decide it at the observed share,
 * and, when `samples` is too few for any share to pass, a note that says so.
 */
export function sloRequestsSetting(p: {
  requests: number
  samples: number
  good: number
  required: number
  confidence: number
}): DecideSetting {
  const z = normalQuantile(1 - (1 - p.confidence) / 2)
  const least = requestsToShow(p.required, z)
  const cannot =
    p.samples < least
      ? `${p.samples} requests cannot show ${formatPercent(p.required)} good at ${formatPercent(p.confidence)} confidence ` +
        `even if every one is good, which takes at least ${least}; `
      : ''
  const share = formatFixed((p.good / p.samples) * 100)
  return { option: 'requests', value: p.requests, why: `${cannot}about ${p.requests} would likely decide it at the ${share}% good seen` }
}

/**
 * A harness limit raised above what was measured, with room for a rerun's noise: 1.5×, rounded up
 * to a whole ms, to 5 ms past 10 ms, to 10 ms past 50 ms.
 */
function roomyLimitMs(measuredMs: number): number {
  const x = measuredMs * 1.5
  const step = x <= 10 ? 1 : x <= 50 ? 5 : 10
  return Math.ceil(x / step) * step
}

/** The most a client thread's CPU share should reach after the streams are spread, as a share of its limit. */
const WORKER_HEADROOM = 0.75

/**
 * What would have let harness-limited records be judged, one setting per option over every
 * launch: `sendLagLimitMs` or `eventLoopDelayLimitMs` raised above the lag seen (with room), and
 * for a client thread over its CPU share, `clientWorkers` enough to spread its streams. Null when
 * a record does not say which limit it exceeded (imports, older records) or no option would help
 * (the cell's own thread is busy beside its workers).
 */
export function harnessSettings(harness: readonly HarnessHealth[]): DecideSetting[] | null {
  const limited = harness.filter((h) => h.harnessLimited)
  if (limited.some((h) => h.exceeded === undefined || h.exceeded.length === 0)) return null
  const most = (option: 'sendLagLimitMs' | 'eventLoopDelayLimitMs') => {
    const over = limited.flatMap((h) => (h.exceeded ?? []).filter((e) => e.option === option))
    return over.length === 0 ? null : over.reduce((a, e) => (e.value > a.value ? e : a))
  }
  const settings: DecideSetting[] = []
  const lag = most('sendLagLimitMs')
  if (lag !== null) {
    const value = roomyLimitMs(lag.value)
    settings.push({
      option: 'sendLagLimitMs',
      value,
      why: `the send lag p99 was ${lag.value.toFixed(2)} ms, over ${lag.limit} ms; raise it where sends that late do not matter to the load`,
    })
  }
  const loop = most('eventLoopDelayLimitMs')
  if (loop !== null) {
    settings.push({
      option: 'eventLoopDelayLimitMs',
      value: roomyLimitMs(loop.value),
      why: `the event-loop delay p99 was ${loop.value.toFixed(2)} ms, over ${loop.limit} ms`,
    })
  }
  let workers = 0
  const busy: string[] = []
  for (const h of limited) {
    for (const e of (h.exceeded ?? []).filter((x) => x.option === 'cpuShareLimit')) {
      const count = h.clientWorkers ?? 0
      // Beside workers, the cell's own thread only schedules: more workers would not unload it.
      if (e.thread === 'cell' && count > 0) return null
      const total = count === 0 ? e.value : (h.workers ?? []).reduce((sum, w) => sum + (w.cpuShare ?? 0), 0)
      workers = Math.max(workers, count + 1, Math.ceil(total / (WORKER_HEADROOM * e.limit)))
      busy.push(
        e.thread === 'cell'
          ? `the client's CPU share was ${e.value.toFixed(2)}`
          : `worker ${e.thread}'s CPU share was ${e.value.toFixed(2)}`,
      )
    }
  }
  if (workers > 0) {
    settings.push({
      option: 'clientWorkers',
      value: workers,
      why: `${[...new Set(busy)].join(', ')} of one core; ${workers} worker thread${workers === 1 ? '' : 's'} would share its streams`,
    })
  }
  return settings
}

/**
 * A superiority claim over launches: the launch-level t-interval of candidate − baseline (log
 * statistics per launch) against ln(threshold). Pass above, fail below, else inconclusive with
 * the launches per arm at which its half-width would likely fall below the gap to the threshold
 * (`repeatsHint`, at the launch-to-launch sd seen).
 */
export function launchLevelVerdict(
  candidate: readonly number[],
  baseline: readonly number[],
  confidence: number,
  threshold: number,
): { interval: ReturnType<typeof launchLevelInterval>; outcome: GateDecision['outcome']; hint: DecideHint | null } {
  const interval = launchLevelInterval(candidate, baseline, confidence)
  const logThreshold = Math.log(threshold)
  const outcome = interval.low > logThreshold ? 'pass' : interval.high < logThreshold ? 'fail' : 'inconclusive'
  if (outcome !== 'inconclusive') return { interval, outcome, hint: null }
  const launches = repeatsHint(
    Math.abs(interval.estimate - logThreshold),
    interval.sd,
    confidence,
    Math.max(candidate.length, baseline.length),
  )
  return { interval, outcome, hint: launches === null ? null : decideHint([repeatsSetting(launches, { launchSd: interval.sd })]) }
}
