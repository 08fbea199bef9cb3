/** A worker thread of `npm run bench:gate`: runs the scenarios it is sent and posts their results. */
import { parentPort } from 'node:worker_threads'
import { type CalibrationPlan, runScenario, type Scenario } from './calibrate.ts'
import type { NoiseModel } from './simulate.ts'

/** One unit of work: a scenario with its seed. */
export interface ScenarioTask {
  id: number
  model: NoiseModel
  scenario: Scenario
  plan: CalibrationPlan
  seed: number
}

parentPort?.on('message', (task: ScenarioTask) => {
  const result = runScenario(task.model, task.scenario, task.plan, task.seed, (line) =>
    parentPort?.postMessage({ id: task.id, progress: `${task.scenario.name}: ${line.trim()}` }),
  )
  parentPort?.postMessage({ id: task.id, result })
})
