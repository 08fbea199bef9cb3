/**
 * What crosses from a vitest worker to the reporter, in task meta (JSON-safe, kept by blob
 * reports, so sharded runs merge into the same evidence): each spec file's declared cells with
 * their run records, and each test's gate decisions and checks with the cell they read. Both
 * carry the meta format and the servegate version that wrote them, so a merge of blobs from
 * another servegate says so instead of misreading them.
 */
import { z } from 'zod'
import { SERVEGATE_VERSION } from '../version.ts'
import { CapacitySearch } from './capacity-record.ts'
import { CheckName, GateDecision } from './gate.ts'
import { RunRecord } from './run.ts'

/**
 * Schema id of the servegate part of a file's or test's meta. Bump when its shape changes (v2:
 * each decision and check names what it judged, and each decision its options and policy).
 */
export const META_SCHEMA_ID = 'servegate.meta/v2'

/** The tag on every servegate meta: its format, and the servegate that wrote it. */
export const MetaTag = z.object({
  schema: z.literal(META_SCHEMA_ID),
  /** The servegate version of the worker that wrote the meta, e.g. `0.1.0`. */
  servegateVersion: z.string().min(1),
})
export type MetaTag = z.infer<typeof MetaTag>

/** The tag a worker of this servegate puts on the meta it writes. */
export const META_TAG: Readonly<MetaTag> = Object.freeze({ schema: META_SCHEMA_ID, servegateVersion: SERVEGATE_VERSION })

/** One arm's run records, one per launch. */
const ArmRecords = z.array(RunRecord).optional()

/** A cell or pair declared in a spec file, as the file's meta carries it after the file ran. */
export const DeclaredCell = z.object({
  id: z.string(),
  kind: z.enum(['cell', 'pair']),
  required: z.boolean(),
  /** A sweep this cell belongs to, or null. */
  ladder: z.string().nullable(),
  /** Engine name per arm (`cell`, or `baseline` and `candidate`). */
  engines: z.record(z.string(), z.string()),
  /**
   * The most of an arm's requests that may fail before the cell is `failed`, as a share (0–1).
   * Null: the default, 0 for a required cell and no limit for one that is not.
   */
  maxFailedShare: z.number().min(0).max(1).nullable().optional(),
  /** `pending`: never run; `measured`: records below; `threw`: its measurement threw (see `error`). */
  status: z.enum(['pending', 'measured', 'threw']),
  error: z.string().nullable(),
  /** Run records per arm, one per launch. */
  records: z.object({ cell: ArmRecords, baseline: ArmRecords, candidate: ArmRecords }),
})
export type DeclaredCell = z.infer<typeof DeclaredCell>

/** The servegate part of a spec file's meta. */
export const FileMeta = MetaTag.extend({ cells: z.array(DeclaredCell) })
export type FileMeta = z.infer<typeof FileMeta>

/**
 * What a gate matcher does with an inconclusive outcome: pass the assertion or fail it. Unless
 * set on the gate or the plugin, the default of the gate's kind (see `DEFAULT_INCONCLUSIVE`).
 */
export const InconclusivePolicy = z.enum(['pass', 'fail'])
export type InconclusivePolicy = z.infer<typeof InconclusivePolicy>

/**
 * Each kind's policy unless told: a superiority claim must be shown, so inconclusive fails; a
 * non-regression claim fails only on a confident regression, so inconclusive passes (with a warning).
 */
export const DEFAULT_INCONCLUSIVE: Readonly<Record<GateDecision['kind'], InconclusivePolicy>> = Object.freeze({
  superiority: 'fail',
  'non-regression': 'pass',
  check: 'fail',
})

/**
 * The policy that turned a decision into the matcher's result, and where it came from: the gate's
 * own `inconclusive` option, the plugin's `servegate({ inconclusive })`, or the default of its kind.
 */
export const DecidingPolicy = z.object({ inconclusive: InconclusivePolicy, from: z.enum(['gate', 'plugin', 'default']) })
export type DecidingPolicy = z.infer<typeof DecidingPolicy>

/** Run records a matcher read, by `runId`, per arm in launch order: a pair's two arms, or one cell's launches. */
export const JudgedRecords = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('pair'),
    baseline: z.array(z.string()).min(1),
    candidate: z.array(z.string()).min(1),
    /** Set when the baseline is a stored run record (`storedBaseline(path)`), not measured in this run: the file it was read from. */
    storedBaseline: z.object({ file: z.string() }).nullable().default(null),
  }),
  z.object({ kind: z.literal('cell'), records: z.array(z.string()).min(1) }),
])
export type JudgedRecords = z.infer<typeof JudgedRecords>

/** What the capacity comparison reads of a search (its records are the probes' cells in the evidence). */
export const JudgedSearch = CapacitySearch.pick({
  id: true,
  axis: true,
  slo: true,
  requiredFraction: true,
  confidence: true,
  bracket: true,
  status: true,
  probes: true,
  warnings: true,
})
export type JudgedSearch = z.infer<typeof JudgedSearch>

/** What a gate read, so that `servegate verify` can decide it again: run records, or two capacity searches. */
export const Judged = z.discriminatedUnion('kind', [
  ...JudgedRecords.options,
  z.object({ kind: z.literal('capacity'), candidate: JudgedSearch, baseline: JudgedSearch }),
])
export type Judged = z.infer<typeof Judged>

/** A gate decision a matcher made, with everything needed to decide it again and to turn it into the test's result. */
export const DecisionMeta = z.object({
  cell: z.string(),
  decision: GateDecision,
  judged: Judged,
  /** The gate's options as the gate function received them, defaults filled in, e.g. `{ gate: 'toWinDecode', margin: 0.05, … }`. */
  options: z.record(z.string(), z.unknown()),
  policy: DecidingPolicy,
  /** The matcher's result before `.not`: `pass`, or `inconclusive` under the policy `pass`. */
  passed: z.boolean(),
  /** Whether the assertion was `.not`: it held when `passed` differs from `isNot`. */
  isNot: z.boolean(),
})
export type DecisionMeta = z.infer<typeof DecisionMeta>

/** A yes/no check a matcher made on a cell, with the records it read. */
export const CheckMeta = z.object({
  cell: z.string(),
  check: CheckName,
  passed: z.boolean(),
  findings: z.array(z.string()),
  judged: JudgedRecords,
  /** Whether the assertion was `.not`: it held when `passed` differs from `isNot`. */
  isNot: z.boolean(),
  /**
   * Facts the check could not verify, each named with the launch and why (a remote deployment's
   * GPU facts nothing could read): not counted as findings. Absent when every fact was checked.
   */
  unverifiable: z.array(z.string()).optional(),
})
export type CheckMeta = z.infer<typeof CheckMeta>

/** The servegate part of a test's meta. */
export const TestMeta = MetaTag.extend({
  decisions: z.array(DecisionMeta),
  checks: z.array(CheckMeta),
  /** Stored baseline records the test judged against (`storedBaseline(path)`), each once: the evidence keeps them. */
  storedBaselines: z.array(z.object({ file: z.string(), record: RunRecord })).default([]),
})
export type TestMeta = z.infer<typeof TestMeta>

/**
 * A meta as the reporter read it: resolved, or why it cannot be used, in one line: `version`
 * when another servegate wrote it (the problem names both versions and the fix), `malformed`
 * when its fields are wrong (the problem names them).
 */
export type MetaRead<T> = { ok: true; meta: T } | { ok: false; reason: 'version' | 'malformed'; problem: string }

/** An issue's path as code would spell it, e.g. `cells[0].records.cell[1].plan`. */
function pathText(path: ReadonlyArray<PropertyKey>): string {
  const text = path.map((k) => (typeof k === 'number' ? `[${k}]` : `.${String(k)}`)).join('')
  return text.startsWith('.') ? text.slice(1) : text || '(the meta itself)'
}

/** A tag's value for a message: a string as it is, anything else as JSON, cut short. */
function shown(value: unknown): string {
  return typeof value === 'string' ? value.slice(0, 60) : (JSON.stringify(value) ?? 'undefined').slice(0, 60)
}

/**
 * Reads a servegate meta with `schema`: first its tag (a meta from another servegate, whose
 * fields may mean something else, is refused by the version it names), then its fields, with
 * the schema's defaults filled in.
 */
function readMeta<S extends typeof FileMeta | typeof TestMeta>(schema: S, raw: unknown): MetaRead<z.infer<S>> {
  const tag = typeof raw === 'object' && raw !== null ? (raw as Partial<Record<keyof MetaTag, unknown>>) : {}
  if (tag.schema !== META_SCHEMA_ID || tag.servegateVersion !== SERVEGATE_VERSION) {
    const found =
      tag.schema === undefined && tag.servegateVersion === undefined
        ? 'a servegate that did not tag it with its version'
        : `servegate ${shown(tag.servegateVersion)} (${shown(tag.schema)})`
    return {
      ok: false,
      reason: 'version',
      problem:
        `written by ${found}, but this reporter is servegate ${SERVEGATE_VERSION} (${META_SCHEMA_ID}): ` +
        `re-run every shard with servegate ${SERVEGATE_VERSION}, the version that merges them, then merge again`,
    }
  }
  const parsed = schema.safeParse(raw)
  if (parsed.success) return { ok: true, meta: parsed.data as z.infer<S> }
  const issues = parsed.error.issues
  const listed = issues.slice(0, 3).map((i) => `${pathText(i.path)}: ${i.message}`)
  if (issues.length > 3) listed.push(`and ${issues.length - 3} more`)
  return { ok: false, reason: 'malformed', problem: `malformed at ${listed.join('; ')}` }
}

/**
 * Reads the servegate part of a spec file's meta, as a blob or a worker left it.
 * @example readFileMeta(testModule.meta().servegateFile)
 */
export function readFileMeta(raw: unknown): MetaRead<FileMeta> {
  return readMeta(FileMeta, raw)
}

/**
 * Reads the servegate part of a test's meta, as a blob or a worker left it.
 * @example readTestMeta(testCase.meta().servegate)
 */
export function readTestMeta(raw: unknown): MetaRead<TestMeta> {
  return readMeta(TestMeta, raw)
}

declare module 'vitest' {
  interface TaskMeta {
    /** On a test: its gate decisions and checks. */
    servegate?: TestMeta
    /** On a spec file: its declared cells and their records. */
    servegateFile?: FileMeta
  }
}
