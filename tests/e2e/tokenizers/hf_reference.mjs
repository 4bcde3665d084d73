// Hugging Face tokenizer.json references over captions: one JSON string a line on stdin, one
// JSON array of ids a line on stdout (special tokens added, no truncation).
//   node hf_reference.mjs rust|js TOKENIZER_JSON
// rust: npm `tokenizers` (the Rust library through its Node binding); js: npm
// `@huggingface/tokenizers` (tokenizers.js, a pure-JavaScript reimplementation).
// NODE_PATH names the node_modules holding them (tests/e2e/tokenizers/npm_setup.sh).
import fs from "fs";
import { createRequire } from "module";

const require = createRequire(process.env.NODE_PATH + "/");
const [kind, file] = process.argv.slice(2);
const captions = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l));
const out = [];
if (kind === "rust") {
  const { Tokenizer } = require("tokenizers");
  const tok = Tokenizer.fromFile(file);
  for (const c of captions) out.push(JSON.stringify((await tok.encode(c)).getIds()));
} else {
  const { Tokenizer } = await import(process.env.NODE_PATH + "/@huggingface/tokenizers/dist/tokenizers.mjs");
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(file, "utf8")), {});
  for (const c of captions) out.push(JSON.stringify(tok.encode(c).ids));
}
process.stdout.write(out.map((l) => l + "\n").join(""));
