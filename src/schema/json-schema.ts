import { z } from 'zod'
import { RUN_SCHEMA_ID, RunRecord } from './run.ts'

/** The published JSON Schema of `servegate.run/v1`, derived from the zod schema (never hand-written). */
export function runRecordJsonSchema(): string {
  const schema = z.toJSONSchema(RunRecord, { target: 'draft-2020-12', io: 'output' })
  const published = { $id: `https://servegate.dev/schema/${RUN_SCHEMA_ID}.json`, title: RUN_SCHEMA_ID, ...schema }
  return `${JSON.stringify(published, null, 2)}\n`
}
