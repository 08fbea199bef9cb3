/**
 * `node benchmarks/ingest-process.ts '<IngestOptions as JSON>'`: one servegate ingest run in a
 * process of its own, as the Python client's is, so the side by side compares two fresh clients:
 * the per-read path compiled (`warmClientJit`, then one request a slot unmeasured, as the Python
 * client warms up), then the measured run. Prints its `IngestResult` as JSON.
 */
import { warmClientJit } from '../src/runner/warm.ts'
import { type IngestOptions, measureIngest } from './ingest.ts'

const options = JSON.parse(process.argv[2] ?? 'null') as IngestOptions | null
if (options === null)
  throw new Error('usage: node benchmarks/ingest-process.ts \'{"origin":…,"concurrency":…,"requests":…,"tokens":…,"deadlineMs":…}\'')
warmClientJit()
// measureIngest warms one request a slot itself before it measures.
process.stdout.write(`${JSON.stringify(await measureIngest(options))}\n`)
