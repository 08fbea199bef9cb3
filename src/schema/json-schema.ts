import { z } from 'zod'
import { EVIDENCE_SCHEMA_ID, EvidenceIndex } from './evidence.ts'
import { HISTORY_SCHEMA_ID, HistoryRun, NOISE_PROFILE_SCHEMA_ID, NoiseProfile } from './noise.ts'
import { RUN_SCHEMA_ID, RunRecord } from './run.ts'

/** A published JSON Schema derived from a zod schema (never hand-written). */
function published(id: string, schema: z.ZodType): string {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' })
  return `${JSON.stringify({ $id: `https://servegate.dev/schema/${id}.json`, title: id, ...json }, null, 2)}\n`
}

/** The published JSON Schema of `servegate.run/v1`. */
export function runRecordJsonSchema(): string {
  return published(RUN_SCHEMA_ID, RunRecord)
}

/** The published JSON Schema of `servegate.evidence/v1` (an evidence directory's index.json). */
export function evidenceIndexJsonSchema(): string {
  return published(EVIDENCE_SCHEMA_ID, EvidenceIndex)
}

/** The published JSON Schema of `servegate.noise-profile/v1` (what `servegate calibrate` writes). */
export function noiseProfileJsonSchema(): string {
  return published(NOISE_PROFILE_SCHEMA_ID, NoiseProfile)
}

/** The published JSON Schema of `servegate.history/v1`: one line of a history store (JSONL). */
export function historyRunJsonSchema(): string {
  return published(HISTORY_SCHEMA_ID, HistoryRun)
}
