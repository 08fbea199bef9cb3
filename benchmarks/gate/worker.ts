/** A worker thread of `npm run bench:gate`: runs the scenarios and estimator cells it is sent and posts their results. */
import { parentPort } from 'node:worker_threads'
import { type CalibrationPlan, runScenario, type Scenario } from './calibrate.ts'
import { type EstimatorStudyCell, type EstimatorStudyPlan, runEstimatorCell } from './estimators.ts'
import type { NoiseModel } from './simulate.ts'

/** One unit of work: a calibration scenario, or a cell of the estimator study, with its seed. */
export type ScenarioTask =
  | { kind: 'scenario'; id: number; name: string; model: NoiseModel; scenario: Scenario; plan: CalibrationPlan; seed: number }
  | { kind: 'estimators'; id: number; name: string; cell: EstimatorStudyCell; plan: EstimatorStudyPlan; seed: number }

parentPort?.on('message', (task: ScenarioTask) => {
  const result =
    task.kind === 'scenario'
      ? runScenario(task.model, task.scenario, task.plan, task.seed, (line) =>
          parentPort?.postMessage({ id: task.id, progress: `${task.name}: ${line.trim()}` }),
        )
      : runEstimatorCell(task.cell, task.plan, task.seed)
  parentPort?.postMessage({ id: task.id, result })
})
