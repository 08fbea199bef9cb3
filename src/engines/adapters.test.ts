import { expect, test } from 'vitest'
import { parseVersionOutput } from './adapters.ts'

test.each([
  ['version: 0.4.0-dev (build 1, commit 80fb11a)\nbuilt with GNU 12.2.0 for Linux x86_64', { version: '0.4.0-dev', commit: '80fb11a' }],
  ['version: 6543 (d8cfd8d1)\nbuilt with cc (Debian 12.2.0-14) 12.2.0', { version: '6543', commit: 'd8cfd8d1' }],
  ['0.11.0\n', { version: '0.11.0', commit: null }],
  ['trtllm-serve, version 1.0.0rc4', { version: '1.0.0rc4', commit: null }],
  ['no version here', { version: null, commit: null }],
])('parseVersionOutput(%j)', (text, expected) => {
  expect(parseVersionOutput(text)).toEqual(expected)
})
