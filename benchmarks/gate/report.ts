/** Renders calibration results: plain text for the terminal, Markdown tables for the docs. */
import { consistentWithOnePercent, type HoldFigures, type Rate, type ScenarioResult, type WinFigures } from './calibrate.ts'
import { type EstimatorChoice, type EstimatorStudyResult, STUDY_MARGIN, STUDY_REQUESTS, STUDY_WIN } from './estimators.ts'
import type { NoiseModel } from './simulate.ts'

const pct = (x: number) => `${(x * 100).toFixed(x < 0.1 ? 2 : 1)}%`
/** A rate with its Clopper–Pearson 95% upper bound. */
const withUpper = (r: Rate) => `${pct(r.rate)} (≤ ${pct(r.cpHigh)})`

/** The calibration targets, judged on the scenarios they are stated for. */
export interface TargetCheck {
  target: string
  scenario: string
  figure: string
  met: boolean
}

/**
 * Targets: A/A false claim consistent with ≤ 1% and a Clopper–Pearson upper bound ≤ 2% (every gate and design);
 * each gate's power within 5 points of the best test for its design that knows the noise model;
 * power ≥ 80% at a 5% effect within 64 paired requests (fixed 64 or sequential by 64);
 * ≤ 32 paired requests on average with sequential looks at a 10% effect. Power targets are
 * judged for one launch per arm only (the launch-level scenarios use more requests by design).
 */
export function checkTargets(results: readonly ScenarioResult[]): TargetCheck[] {
  const checks: TargetCheck[] = []
  for (const r of results) {
    if (!r.scenario.targets) continue
    const scenario = r.scenario.name
    const single = r.scenario.launches === 1
    for (const w of r.win) {
      const aa = [w.aa.fixed64?.pass, w.aa.fixedAll.pass, w.aa.sequential?.pass].filter((x): x is Rate => x !== undefined)
      const worst = aa.reduce((a, b) => (b.rate > a.rate ? b : a))
      checks.push({
        target: `${w.gate} A/A false win consistent with ≤ 1% (upper ≤ 2%)`,
        scenario,
        figure: `${withUpper(worst)}, lower ${pct(worst.cpLow)}`,
        met: consistentWithOnePercent(worst),
      })
      for (const p of r.scenario.power ? w.power : []) {
        for (const [design, f] of [
          ['fixed 64', p.figures.fixed64],
          [single ? 'fixed 128' : 'launch level', p.figures.fixedAll],
        ] as const) {
          if (f === null) continue
          checks.push({
            target: `${w.gate} power within 5 points of the best test at +${pct(p.effect)} (${design})`,
            scenario,
            figure: `${pct(f.pass.rate)} vs ${pct(f.oracle.rate)}`,
            met: f.pass.rate >= f.oracle.rate - 0.05,
          })
        }
      }
      if (!r.scenario.power || !single) continue
      const five = w.power.find((p) => p.effect === 0.05)?.figures
      const ten = w.power.find((p) => p.effect === 0.1)?.figures
      if (five !== undefined) {
        const within64 = Math.max(five.fixed64?.pass.rate ?? 0, five.sequential?.passBy64.rate ?? 0)
        checks.push({
          target: `${w.gate} power ≥ 80% at +5% within 64 paired requests`,
          scenario,
          figure: pct(within64),
          met: within64 >= 0.8,
        })
      }
      if (ten?.sequential) {
        checks.push({
          target: `${w.gate} ≤ 32 paired requests on average at +10% (sequential)`,
          scenario,
          figure: ten.sequential.meanRequests.toFixed(1),
          met: ten.sequential.meanRequests <= 32,
        })
      }
    }
    for (const h of r.hold) {
      checks.push({
        target: `${h.gate} A/A false fail consistent with ≤ 1% (upper ≤ 2%)`,
        scenario,
        figure: withUpper(h.aa.fail),
        met: consistentWithOnePercent(h.aa.fail),
      })
      checks.push({
        target: `${h.gate} false fail at the tolerance consistent with ≤ 1% (upper ≤ 2%)`,
        scenario,
        figure: withUpper(h.edge.fail),
        met: consistentWithOnePercent(h.edge.fail),
      })
    }
  }
  return checks
}

function winLines(f: WinFigures): string {
  const parts: string[] = []
  if (f.fixed64)
    parts.push(`fixed 64: pass ${withUpper(f.fixed64.pass)} fail ${pct(f.fixed64.fail.rate)} best test ${pct(f.fixed64.oracle.rate)}`)
  parts.push(
    `${f.fixed64 ? 'fixed 128' : 'launch level'}: pass ${withUpper(f.fixedAll.pass)} fail ${pct(f.fixedAll.fail.rate)} ` +
      `best test ${pct(f.fixedAll.oracle.rate)}`,
  )
  if (f.sequential)
    parts.push(
      `sequential: pass ${withUpper(f.sequential.pass)} (by 64: ${pct(f.sequential.passBy64.rate)}) ` +
        `fail ${pct(f.sequential.fail.rate)}, mean ${f.sequential.meanRequests.toFixed(1)} requests`,
    )
  return parts.join(' | ')
}

function holdLine(f: HoldFigures): string {
  return `fail ${withUpper(f.fail)} pass ${pct(f.pass.rate)}`
}

/** The terminal report. */
export function renderText(model: NoiseModel, results: readonly ScenarioResult[], seconds: number): string {
  const lines: string[] = []
  lines.push(`noise model: ${JSON.stringify(model)}`)
  for (const r of results) {
    const s = r.scenario
    lines.push(
      '',
      `== ${s.name} (simulated launch sd ${pct(s.launchSd)}, ${s.launches} launch(es) × ${s.requestsPerLaunch} requests per arm)`,
    )
    for (const w of r.win) {
      lines.push(`${w.gate}`, `  A/A          ${winLines(w.aa)}`)
      for (const p of w.power) lines.push(`  +${pct(p.effect).padEnd(10)} ${winLines(p.figures)}`)
    }
    for (const h of r.hold) {
      lines.push(`${h.gate}`, `  A/A (ratio 1)          ${holdLine(h.aa)}`, `  at the tolerance       ${holdLine(h.edge)}`)
      for (const p of h.power) lines.push(`  tolerance × ${(1 + p.effect).toFixed(2)}     ${holdLine(p.figures)}`)
    }
  }
  lines.push('', 'targets:')
  for (const c of checkTargets(results)) lines.push(`  ${c.met ? 'met    ' : 'NOT MET'} ${c.target}: ${c.figure} — ${c.scenario}`)
  lines.push('', `done in ${seconds.toFixed(1)} s`)
  return lines.join('\n')
}

/** Markdown tables for docs/gates.md. */
export function renderMarkdown(results: readonly ScenarioResult[]): string {
  const lines: string[] = []
  for (const r of results) {
    const s = r.scenario
    lines.push('', `**${s.name}**`, '')
    if (s.launches > 1) {
      lines.push('| gate | A/A false win (best test) | pass at +3% (best test) | +5% | +10% |', '| --- | --- | --- | --- | --- |')
      for (const w of r.win) {
        const at = (e: number) => {
          const f = w.power.find((p) => p.effect === e)?.figures
          return f ? `${pct(f.fixedAll.pass.rate)} (${pct(f.fixedAll.oracle.rate)})` : '–'
        }
        lines.push(
          `| ${w.gate} | ${withUpper(w.aa.fixedAll.pass)} (${pct(w.aa.fixedAll.oracle.rate)}) | ${at(0.03)} | ${at(0.05)} | ${at(0.1)} |`,
        )
      }
    } else {
      lines.push(
        '| gate | A/A false win: fixed 64 / 128 / sequential | pass at +3%: 64 / 128 / seq | +5% | +10% | ' +
          'best test at +5%: 64 / 128 | mean requests (seq) at +3 / 5 / 10% |',
        '| --- | --- | --- | --- | --- | --- | --- |',
      )
      for (const w of r.win) {
        const aa = [w.aa.fixed64?.pass, w.aa.fixedAll.pass, w.aa.sequential?.pass]
          .map((rate) => (rate === undefined ? '–' : withUpper(rate)))
          .join(' / ')
        const at = (e: number) => {
          const f = w.power.find((p) => p.effect === e)?.figures
          return f
            ? `${pct(f.fixed64?.pass.rate ?? 0)} / ${pct(f.fixedAll.pass.rate)} / ` +
                (f.sequential === null ? '–' : `${pct(f.sequential.pass.rate)} (by 64: ${pct(f.sequential.passBy64.rate)})`)
            : '–'
        }
        const five = w.power.find((p) => p.effect === 0.05)?.figures
        const best = five ? `${pct(five.fixed64?.oracle.rate ?? 0)} / ${pct(five.fixedAll.oracle.rate)}` : '–'
        const used = w.power.length > 0 ? w.power.map((p) => p.figures.sequential?.meanRequests.toFixed(0) ?? '–').join(' / ') : '–'
        lines.push(`| ${w.gate} | ${aa} | ${at(0.03)} | ${at(0.05)} | ${at(0.1)} | ${best} | ${used} |`)
      }
    }
    if (r.hold.length > 0) {
      lines.push(
        '',
        '| latency gate | A/A false fail | false fail at the tolerance | fail at tolerance × 1.03 | × 1.05 | × 1.10 | pass under A/A |',
        '| --- | --- | --- | --- | --- | --- | --- |',
      )
      for (const h of r.hold) {
        const at = (e: number) => {
          const f = h.power.find((p) => p.effect === e)?.figures
          return f ? pct(f.fail.rate) : '–'
        }
        lines.push(
          `| ${h.gate} | ${withUpper(h.aa.fail)} | ${withUpper(h.edge.fail)} | ` +
            `${at(0.03)} | ${at(0.05)} | ${at(0.1)} | ${pct(h.aa.pass.rate)} |`,
        )
      }
    }
  }
  return lines.join('\n')
}

/** The estimator study as a Markdown table: one row per base, noise model and gate, the estimators side by side. */
export function renderEstimatorMarkdown(results: readonly EstimatorStudyResult[], choices: readonly EstimatorChoice[]): string {
  const estimators = results[0]?.gates[0]?.estimators.map((e) => e.estimator) ?? []
  const head = estimators.map((e) => `${e}: A/A / boundary / +${pct(STUDY_WIN)}`).join(' | ')
  const lines = [
    `| per-request noise | model | gate | ${head} | ${results[0]?.holdAa.gate ?? 'hold'} A/A false fail |`,
    `| --- | --- | --- | ${estimators.map(() => '---').join(' | ')} | --- |`,
  ]
  for (const r of results) {
    r.gates.forEach((g, i) => {
      const cells = g.estimators.map((f) => `${pct(f.aa.rate)} / ${pct(f.boundary.rate)} / **${pct(f.power.rate)}**`)
      const hold = i === 0 ? withUpper(r.holdAa.fail) : ''
      lines.push(`| ${r.base} | ${r.model} (${r.description}) | ${g.gate} | ${cells.join(' | ')} | ${hold} |`)
    })
  }
  lines.push('', '| gate | estimator | worst level | worst power (where) | chosen |', '| --- | --- | --- | --- | --- |')
  for (const c of choices)
    for (const w of c.worst)
      lines.push(
        `| ${c.gate} | ${w.estimator} | ${pct(w.level)}${w.levelHolds ? '' : ' (not consistent with ≤ 1%)'} | ${pct(w.power)} (${w.powerModel}) | ` +
          `${c.chosen === w.estimator ? 'yes' : ''} |`,
      )
  return lines.join('\n')
}

/** The estimator study for the terminal: the figures per cell, the worst cases and the choice against the defaults. */
export function renderEstimatorText(
  results: readonly EstimatorStudyResult[],
  choices: readonly EstimatorChoice[],
  defaults: Readonly<Record<string, string>>,
): string {
  const lines = [
    `estimators: ${STUDY_REQUESTS} paired requests, one launch per arm, default launchNoise; ` +
      `level = A/A false pass (margin 0) / false pass at the boundary (margin ${STUDY_MARGIN} = true effect); power at +${pct(STUDY_WIN)}`,
  ]
  for (const r of results) {
    lines.push(`== ${r.model} (${r.description}), ${r.base}; ${r.holdAa.gate} A/A false fail ${withUpper(r.holdAa.fail)}`)
    for (const g of r.gates)
      for (const f of g.estimators)
        lines.push(
          `  ${g.gate.padEnd(16)} ${f.estimator.padEnd(15)} A/A ${withUpper(f.aa).padEnd(18)} boundary ${withUpper(f.boundary).padEnd(18)} ` +
            `power ${pct(f.power.rate)}`,
        )
  }
  lines.push('', 'estimator choice (best worst-case power, level consistent with ≤ 1% everywhere):')
  for (const c of choices) {
    for (const w of c.worst)
      lines.push(
        `  ${c.gate.padEnd(16)} ${w.estimator.padEnd(15)} worst level ${pct(w.level)} worst power ${pct(w.power)} (${w.powerModel})`,
      )
    const current = defaults[c.gate]
    lines.push(`  ${c.gate}: chosen ${c.chosen ?? 'none'}; default ${current}${c.chosen === current ? '' : ' — DIFFERS'}`)
  }
  return lines.join('\n')
}
