/**
 * What `servegate init` writes into an engine team's repository: the vitest config, a
 * baseline-vs-candidate spec that runs on a GPU or on the simulated engine, the CI workflow
 * and the .gitignore block. Plain strings, so the command and its tests share one source.
 */
import { GITHUB_COMMENT_LIMIT, PR_COMMENT_MARKER } from '../evidence/pr-comment.ts'

/** Where the evidence goes; the workflow and the next steps name the same directory. */
export const EVIDENCE_DIR = 'evidence'

/** Where each shard's blob report goes, and the directory `vitest --merge-reports` reads. */
export const BLOB_DIR = '.vitest/blob'

/** Marks the one pull-request comment the workflow posts and then updates (its first line). */
export const COMMENT_MARKER = PR_COMMENT_MARKER

/** GitHub's limit on a comment body, characters; `servegate report --pr-comment` stays within it. */
export const COMMENT_LIMIT = GITHUB_COMMENT_LIMIT

/** The file the workflow renders the comment into, then posts and appends to the job summary. */
export const COMMENT_FILE = 'servegate-comment.md'

export const VITEST_CONFIG_PATH = 'vitest.config.ts'
export const SPEC_PATH = 'benchmarks/serving.bench.ts'
export const WORKFLOW_PATH = '.github/workflows/servegate.yml'

/** The two lines to add to a vitest config that servegate init leaves alone. */
export const CONFIG_IMPORT_LINE = `import { servegate } from 'servegate/vitest'`
export const CONFIG_PLUGIN_LINE = `plugins: [servegate({ evidenceDir: '${EVIDENCE_DIR}' })],`

export const VITEST_CONFIG = `import { defineConfig } from 'vitest/config'
${CONFIG_IMPORT_LINE}

export default defineConfig({ plugins: [servegate({ evidenceDir: '${EVIDENCE_DIR}' })] })
`

export const SERVING_SPEC = `/**
 * A baseline-vs-candidate pair on the same request stream, gated by servegate's matchers.
 * Run it with \`npx vitest bench --run\`; the evidence goes to ${EVIDENCE_DIR}/.
 *
 * SERVEGATE_ENGINES=gpu: vLLM (baseline) against your engine (candidate) on this machine's GPU.
 * Otherwise both arms are servegate's simulated engine (no GPU, no model), the candidate twice as
 * fast at decode and prefill, so the same file runs anywhere in seconds.
 */
import { describe, expect, test } from 'vitest'
import { engine, pair } from 'servegate'

// Node's process, declared so the spec type-checks without @types/node.
declare const process: { env: Record<string, string | undefined> }
const gpu = process.env.SERVEGATE_ENGINES === 'gpu'

// One model for both arms, so the comparison is fair. Set the revision to a commit of the weights
// so the evidence records exactly what was served.
const model = { id: 'Qwen/Qwen3-8B', revision: null }

const baseline = gpu
  ? engine.vllm({ name: 'vllm', model, maxContext: 8192 })
  : engine.sim({ name: 'sim-baseline', model, sim: { decodeTokPerS: 100, prefillTokPerS: 10_000 } })

// Your engine: an argv, never a shell string; servegate fills in {host}, {port} and {modelId}
// ({modelPath} is the local weights, with model.path set). It must serve OpenAI-compatible
// streaming chat completions on that port and answer 200 on /health once ready.
const candidate = gpu
  ? engine.command({ name: 'my-engine', argv: ['my-engine', 'serve', '{modelId}', '--host', '{host}', '--port', '{port}'], model })
  : engine.sim({ name: 'sim-candidate', model, sim: { decodeTokPerS: 200, prefillTokPerS: 20_000 } })

// On a GPU the cell is sized for steady state; on the simulated engine it is small enough for seconds.
const concurrency = 8
const requests = gpu ? 32 * concurrency : 8 * concurrency

describe(\`\${model.id} at concurrency \${concurrency}\`, () => {
  const p = pair({
    baseline,
    candidate,
    concurrency,
    requests,
    warmupRequests: concurrency,
    maxTokens: gpu ? 256 : 32,
    // The same seeded prompts on both arms, sized with the engine's tokenizer; every reply held to
    // exactly maxTokens tokens (ignore_eos), so both arms decode the same lengths.
    workload: { promptTokens: gpu ? 2048 : 512, seed: 17, outputControl: { mode: 'strict' } },
  })

  test('is a matched pair', async () => expect(await p).toBeMatchedPair())
  test('the candidate wins decode by more than 5%', async () => expect(await p).toWinDecode({ margin: 0.05 }))
  test('the candidate holds p95 TTFT within 10% of the baseline', async () =>
    expect(await p).toHoldLatency({ metric: 'ttft', percentile: 95, notWorseThanPct: 10 }))
})
`

/**
 * The github-script step's script: posts the comment `servegate report --pr-comment` rendered, or
 * updates the one a bot posted before, found by the marker on its first line: one comment per PR.
 */
const COMMENT_SCRIPT = `const fs = require('fs')
const marker = '${COMMENT_MARKER}'
const body = fs.readFileSync('${COMMENT_FILE}', 'utf8')
if (!body.startsWith(marker)) throw new Error('${COMMENT_FILE} does not start with ' + marker + ': render it with servegate report --pr-comment')
if (body.length > ${COMMENT_LIMIT}) throw new Error('${COMMENT_FILE} has ' + body.length + ' characters, over GitHub\\'s ${COMMENT_LIMIT}')
const { owner, repo } = context.repo
const issue_number = context.issue.number
const comments = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number, per_page: 100 })
const previous = comments.find((c) => c.user?.type === 'Bot' && c.body?.startsWith(marker))
if (previous) await github.rest.issues.updateComment({ owner, repo, comment_id: previous.id, body })
else await github.rest.issues.createComment({ owner, repo, issue_number, body })
`

/**
 * The shard count is read from the blob names (blob-<shard>-<count>.json); every shard's file must
 * be there. Plain shell, so the workflow needs nothing but npm packages.
 */
const SHARD_CHECK = `n=$(ls ${BLOB_DIR} | sed -n 's/^blob-[0-9]*-\\([0-9]*\\)\\.json$/\\1/p' | sort -nu | tail -n 1)
test -n "$n" || { echo "::error::no blob report in ${BLOB_DIR}"; exit 1; }
for i in $(seq 1 "$n"); do
  test -f "${BLOB_DIR}/blob-$i-$n.json" || { echo "::error::shard $i/$n left no blob report"; exit 1; }
done
`

/** The lines of a block indented by `n` spaces. */
function indent(text: string, n: number): string {
  return text
    .trimEnd()
    .split('\n')
    .map((line) => (line === '' ? '' : `${' '.repeat(n)}${line}`))
    .join('\n')
}

export const WORKFLOW = `# servegate: the benchmark specs on self-hosted GPU runners, in shards, merged into one evidence
# directory that gates the merge. Written by \`servegate init\`; docs/ci.md in the servegate package
# explains each step, the runner labels, the permissions and how to change the shard count.
name: servegate

on:
  pull_request:
  push:
    branches: [main]
  workflow_dispatch:

permissions:
  contents: read

# One run per branch at a time: a new push to a pull request cancels the GPU time of the previous one.
concurrency:
  group: servegate-\${{ github.ref }}
  cancel-in-progress: \${{ github.event_name == 'pull_request' }}

jobs:
  bench:
    name: bench (shard \${{ matrix.shard }}/\${{ strategy.job-total }})
    runs-on: [self-hosted, linux, gpu]
    timeout-minutes: 240
    strategy:
      # Every shard runs to the end: the merge needs all of them, passed or failed.
      fail-fast: false
      matrix:
        shard: [1, 2]
    env:
      SERVEGATE_ENGINES: gpu
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@v4
        with:
          node-version: 24
          cache: npm
      - run: npm ci
      - name: Run this shard's spec files
        run: npx vitest bench --run --passWithNoTests --shard=\${{ matrix.shard }}/\${{ strategy.job-total }} --reporter=default --reporter=blob --outputFile=${BLOB_DIR}/blob-\${{ matrix.shard }}-\${{ strategy.job-total }}.json
      - name: Upload the blob report
        if: \${{ !cancelled() }}
        uses: actions/upload-artifact@v4
        with:
          name: servegate-blob-\${{ matrix.shard }}
          path: ${BLOB_DIR}/
          include-hidden-files: true
          if-no-files-found: error
          retention-days: 7

  evidence:
    name: evidence
    needs: bench
    # Merge whatever the shards measured, failed gates included; skip only a cancelled run.
    if: \${{ !cancelled() }}
    runs-on: ubuntu-latest
    permissions:
      contents: read
      pull-requests: write
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@v4
        with:
          node-version: 24
          cache: npm
      - run: npm ci
      - name: Download the blob reports
        uses: actions/download-artifact@v4
        with:
          pattern: servegate-blob-*
          path: ${BLOB_DIR}
          merge-multiple: true
      - name: Check that every shard left its blob report
        # A shard that crashed before writing one would leave its cells out of the evidence unseen.
        run: |
${indent(SHARD_CHECK, 10)}
      - name: Merge the shards into ${EVIDENCE_DIR}/
        # A failed test fails this step; promotion below decides the job, after the comment and upload.
        # The job summary gets the PR comment below (gate table first), so the reporter's board is not added twice.
        continue-on-error: true
        run: GITHUB_STEP_SUMMARY= npx vitest --merge-reports=${BLOB_DIR}
      - name: Verify the evidence
        run: npx servegate verify ${EVIDENCE_DIR}
      - name: Render the pull-request comment (gate table, verdict, the board collapsed) into the job summary
        if: \${{ !cancelled() && hashFiles('${EVIDENCE_DIR}/index.json') != '' }}
        run: |
          npx servegate report ${EVIDENCE_DIR} --pr-comment > ${COMMENT_FILE}
          cat ${COMMENT_FILE} >> "$GITHUB_STEP_SUMMARY"
      - name: Post or update the comment on the pull request
        if: \${{ !cancelled() && github.event_name == 'pull_request' && hashFiles('${COMMENT_FILE}') != '' }}
        # Pull requests from forks get a read-only token: no comment, and no failure for it.
        continue-on-error: true
        uses: actions/github-script@v7
        with:
          script: |
${indent(COMMENT_SCRIPT, 12)}
      - name: Upload the evidence
        if: \${{ !cancelled() && hashFiles('${EVIDENCE_DIR}/index.json') != '' }}
        uses: actions/upload-artifact@v4
        with:
          name: servegate-evidence
          path: ${EVIDENCE_DIR}/
          if-no-files-found: error
      - name: Require promotable evidence
        run: npx servegate verify ${EVIDENCE_DIR} --require-promotable
`

/** Marks the block servegate init appends to .gitignore. */
export const GITIGNORE_BEGIN = '# >>> servegate (servegate init)'
export const GITIGNORE_END = '# <<< servegate'

/**
 * What servegate writes that is never committed: engine logs and generated models, the evidence
 * (a CI artifact), vitest's blob reports and attachments. Anchored to the root, where
 * vitest.config.ts puts them.
 */
export const GITIGNORE_LINES = ['/.servegate/', `/${EVIDENCE_DIR}/`, `/${EVIDENCE_DIR}-partial/`, '/.vitest/', '/servegate-runs/'] as const
