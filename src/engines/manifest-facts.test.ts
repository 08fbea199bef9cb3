import { expect, test } from 'vitest'
import { redactArgv } from './manifest-facts.ts'

test('redactArgv hides the values of secret flags, never those of flags about token counts or the tokenizer', () => {
  const argv = [
    'vllm',
    '--enable-prompt-tokens-details',
    '--max-num-batched-tokens',
    '8192',
    '--tokenizer',
    'org/tok',
    '--api-key',
    'sk-live-0123456789abcdef',
    '--hf-token=hf_abcdefghijklmnop',
  ]
  expect(redactArgv(argv)).toEqual([
    'vllm',
    '--enable-prompt-tokens-details',
    '--max-num-batched-tokens',
    '8192',
    '--tokenizer',
    'org/tok',
    '--api-key',
    '[redacted]',
    '--hf-token=[redacted]',
  ])
})
