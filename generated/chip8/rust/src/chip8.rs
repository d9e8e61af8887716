//! One CHIP-8 machine running the Breakout ROM: a port of `references/chip8/chip8.py`.
//!
//! Same interpreter choices as the reference (see its docstring): addresses wrap at 4 KiB,
//! VIP shifts (VY into VX), flags written last, FX55/FX65 advance I, sprites wrap around the
//! screen, FX0A repeats while no key is held, xorshift32 for CXNN, SP wraps mod 16, unknown
//! opcodes do nothing. One handler per opcode, named after its pattern.

pub const ROM_START: usize = 0x200;
pub const SCORE: usize = 0x3A0;
pub const OVER: usize = 0x3A2;
pub const INSTRUCTIONS_PER_FRAME: usize = 32;
pub const EPISODE_CAP: i32 = 3000;
pub const WIDTH: usize = 64;
pub const HEIGHT: usize = 32;
pub const OBS_SIZE: usize = 8;
pub const MEMORY: usize = 4096;
pub const PIXELS: usize = WIDTH * HEIGHT;

/// `breakout.asm` as assembled by `references/chip8/asm.py` (checked by tests/test_chip8_ports.py).
pub const ROM: [u8; 444] = [
    0x23, 0x20, 0x00, 0xE0, 0x64, 0x15, 0x65, 0x1E, 0x6A, 0x00, 0x6B, 0x03, 0x6C, 0x24, 0xA3, 0x67,
    0x60, 0x00, 0x61, 0x03, 0xD0, 0x13, 0x70, 0x04, 0x30, 0x30, 0x12, 0x14, 0xA3, 0x65, 0xD4, 0x51,
    0x22, 0xFE, 0x22, 0xE0, 0xF0, 0x07, 0x30, 0x00, 0x12, 0x24, 0x60, 0x01, 0xF0, 0x15, 0xA3, 0x65,
    0x60, 0x04, 0xE0, 0xA1, 0x22, 0x5C, 0x60, 0x06, 0xE0, 0xA1, 0x22, 0x68, 0xA3, 0x64, 0xD6, 0x71,
    0x86, 0x84, 0x87, 0x94, 0x46, 0xFF, 0x22, 0x74, 0x46, 0x30, 0x22, 0x7A, 0x47, 0xFF, 0x22, 0x80,
    0x47, 0x1F, 0x12, 0xCA, 0xD6, 0x71, 0x3F, 0x00, 0x22, 0x86, 0x12, 0x24, 0x44, 0x00, 0x00, 0xEE,
    0xD4, 0x51, 0x74, 0xFF, 0xD4, 0x51, 0x00, 0xEE, 0x44, 0x2A, 0x00, 0xEE, 0xD4, 0x51, 0x74, 0x01,
    0xD4, 0x51, 0x00, 0xEE, 0x66, 0x01, 0x68, 0x01, 0x00, 0xEE, 0x66, 0x2E, 0x68, 0xFF, 0x00, 0xEE,
    0x67, 0x01, 0x69, 0x01, 0x00, 0xEE, 0x47, 0x1E, 0x12, 0xB0, 0x60, 0xFC, 0x80, 0x62, 0xA3, 0x66,
    0xD0, 0x71, 0x60, 0x00, 0x89, 0x07, 0x8E, 0xF0, 0x22, 0xFE, 0x7A, 0x01, 0x22, 0xFE, 0x80, 0xA0,
    0xA3, 0xA0, 0xF0, 0x55, 0x60, 0x02, 0xF0, 0x18, 0x7C, 0xFF, 0x3C, 0x00, 0x00, 0xEE, 0x12, 0xF6,
    0xD6, 0x71, 0x67, 0x1D, 0x69, 0xFF, 0x80, 0x60, 0x80, 0x45, 0x8E, 0xF0, 0x68, 0x01, 0x61, 0x03,
    0x80, 0x15, 0x3F, 0x01, 0x68, 0xFF, 0xD6, 0x71, 0x00, 0xEE, 0x22, 0xFE, 0x7B, 0xFF, 0x22, 0xFE,
    0x80, 0xB0, 0xA3, 0xA1, 0xF0, 0x55, 0x3B, 0x00, 0x12, 0xDC, 0x12, 0xF6, 0x22, 0xE0, 0x12, 0x24,
    0xC6, 0x1F, 0x76, 0x08, 0x67, 0x0A, 0x69, 0x01, 0x68, 0x01, 0xC0, 0x01, 0x30, 0x00, 0x68, 0xFF,
    0xA3, 0x64, 0xD6, 0x71, 0x00, 0xEE, 0x60, 0x01, 0xA3, 0xA2, 0xF0, 0x55, 0x12, 0xFC, 0xA3, 0xA3,
    0xFA, 0x33, 0xF2, 0x65, 0x63, 0x32, 0x6D, 0x01, 0xF0, 0x29, 0xD3, 0xD5, 0x73, 0x05, 0xF1, 0x29,
    0xD3, 0xD5, 0x73, 0x05, 0xF2, 0x29, 0xD3, 0xD5, 0x6D, 0x0A, 0xFB, 0x29, 0xD3, 0xD5, 0x00, 0xEE,
    0x00, 0x00, 0x60, 0x5A, 0x61, 0x0F, 0x80, 0x11, 0x80, 0x13, 0x62, 0xC8, 0x82, 0x04, 0x86, 0xF0,
    0x83, 0x26, 0x87, 0xF0, 0x82, 0x3E, 0x88, 0xF0, 0x52, 0x30, 0x92, 0x30, 0x70, 0x01, 0x61, 0x0F,
    0xE1, 0x9E, 0x13, 0x46, 0xF5, 0x0A, 0x64, 0x02, 0x80, 0x40, 0xB3, 0x4C, 0x13, 0x50, 0x13, 0x52,
    0x65, 0xEE, 0xF4, 0x07, 0xA3, 0xA6, 0xF4, 0x1E, 0xF8, 0x55, 0xA3, 0xA6, 0xF5, 0x65, 0x60, 0x00,
    0xF0, 0x15, 0x00, 0xEE, 0x80, 0xFC, 0xE0, 0xE0, 0xE0, 0xE0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

pub const FONT: [u8; 80] = [
    0xF0, 0x90, 0x90, 0x90, 0xF0, 0x20, 0x60, 0x20, 0x20, 0x70, // 0 1
    0xF0, 0x10, 0xF0, 0x80, 0xF0, 0xF0, 0x10, 0xF0, 0x10, 0xF0, // 2 3
    0x90, 0x90, 0xF0, 0x10, 0x10, 0xF0, 0x80, 0xF0, 0x10, 0xF0, // 4 5
    0xF0, 0x80, 0xF0, 0x90, 0xF0, 0xF0, 0x10, 0x20, 0x40, 0x40, // 6 7
    0xF0, 0x90, 0xF0, 0x90, 0xF0, 0xF0, 0x90, 0xF0, 0x10, 0xF0, // 8 9
    0xF0, 0x90, 0xF0, 0x90, 0x90, 0xE0, 0x90, 0xE0, 0x90, 0xE0, // A B
    0xF0, 0x80, 0x80, 0x80, 0xF0, 0xE0, 0x90, 0x90, 0x90, 0xE0, // C D
    0xF0, 0x80, 0xF0, 0x80, 0xF0, 0xF0, 0x80, 0xF0, 0x80, 0x80, // E F
];

pub fn xorshift32(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

pub fn seed_to_rng(seed: u32) -> u32 {
    let mut x = (seed ^ 0x9E37_79B9).wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    if x == 0 {
        1
    } else {
        x
    }
}

#[derive(Clone)]
pub struct Chip8 {
    pub memory: [u8; MEMORY],
    pub v: [u8; 16],
    pub i: i32,
    pub pc: i32,
    pub sp: i32,
    pub stack: [i32; 16],
    pub delay_timer: i32,
    pub sound_timer: i32,
    pub framebuffer: [u8; PIXELS],
    pub keys: [u8; 16],
    pub rng: u32,
    pub frame: i32,
}

impl Default for Chip8 {
    fn default() -> Self {
        let mut m = Chip8 {
            memory: [0; MEMORY],
            v: [0; 16],
            i: 0,
            pc: ROM_START as i32,
            sp: 0,
            stack: [0; 16],
            delay_timer: 0,
            sound_timer: 0,
            framebuffer: [0; PIXELS],
            keys: [0; 16],
            rng: 1,
            frame: 0,
        };
        m.reset(0);
        m
    }
}

impl Chip8 {
    pub fn reset(&mut self, seed: u32) {
        self.memory = [0; MEMORY];
        self.memory[..FONT.len()].copy_from_slice(&FONT);
        self.memory[ROM_START..ROM_START + ROM.len()].copy_from_slice(&ROM);
        self.v = [0; 16];
        self.i = 0;
        self.pc = ROM_START as i32;
        self.sp = 0;
        self.stack = [0; 16];
        self.delay_timer = 0;
        self.sound_timer = 0;
        self.framebuffer = [0; PIXELS];
        self.keys = [0; 16];
        self.rng = seed_to_rng(seed);
        self.frame = 0;
    }

    pub fn observe(&self, out: &mut [f32]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = self.v[4 + k] as f32 / 255.0;
        }
    }

    /// One frame: returns (reward, terminated, truncated).
    pub fn step(&mut self, action: i32) -> (f32, bool, bool) {
        let before = self.memory[SCORE] as i32;
        self.keys = [0; 16];
        match action {
            1 => self.keys[0x4] = 1,
            2 => self.keys[0x6] = 1,
            _ => {}
        }
        for _ in 0..INSTRUCTIONS_PER_FRAME {
            self.execute();
        }
        self.delay_timer = (self.delay_timer - 1).max(0);
        self.sound_timer = (self.sound_timer - 1).max(0);
        self.frame += 1;
        let reward = (self.memory[SCORE] as i32 - before) as f32;
        (reward, self.memory[OVER] != 0, self.frame >= EPISODE_CAP)
    }

    #[inline]
    fn mem(&self, addr: i32) -> u8 {
        self.memory[(addr & 0xFFF) as usize]
    }

    #[inline]
    fn skip(&mut self) {
        self.pc = (self.pc + 2) & 0xFFF;
    }

    pub fn execute(&mut self) {
        let pc = self.pc;
        let op = (self.mem(pc) as u16) << 8 | self.mem(pc + 1) as u16;
        self.pc = (pc + 2) & 0xFFF;
        let x = (op >> 8 & 0xF) as usize;
        let y = (op >> 4 & 0xF) as usize;
        let nn = (op & 0xFF) as u8;
        let nnn = (op & 0xFFF) as i32;
        match op >> 12 {
            0x0 => match op {
                0x00E0 => self.op_00e0(),
                0x00EE => self.op_00ee(),
                _ => {} // 0NNN: ignored
            },
            0x1 => self.pc = nnn,
            0x2 => self.op_2nnn(nnn),
            0x3 => {
                if self.v[x] == nn {
                    self.skip()
                }
            }
            0x4 => {
                if self.v[x] != nn {
                    self.skip()
                }
            }
            0x5 => {
                if op & 0xF == 0 && self.v[x] == self.v[y] {
                    self.skip()
                }
            }
            0x6 => self.v[x] = nn,
            0x7 => self.v[x] = self.v[x].wrapping_add(nn),
            0x8 => self.alu(op & 0xF, x, y),
            0x9 => {
                if op & 0xF == 0 && self.v[x] != self.v[y] {
                    self.skip()
                }
            }
            0xA => self.i = nnn,
            0xB => self.pc = (nnn + self.v[0] as i32) & 0xFFF,
            0xC => self.op_cxnn(x, nn),
            0xD => self.op_dxyn(x, y, (op & 0xF) as i32),
            0xE => match nn {
                0x9E => {
                    if self.keys[(self.v[x] & 0xF) as usize] != 0 {
                        self.skip()
                    }
                }
                0xA1 => {
                    if self.keys[(self.v[x] & 0xF) as usize] == 0 {
                        self.skip()
                    }
                }
                _ => {}
            },
            _ => self.misc(nn, x),
        }
    }

    fn op_00e0(&mut self) {
        self.framebuffer = [0; PIXELS];
    }

    fn op_00ee(&mut self) {
        self.sp = (self.sp - 1) & 0xF;
        self.pc = self.stack[self.sp as usize];
    }

    fn op_2nnn(&mut self, nnn: i32) {
        self.stack[self.sp as usize] = self.pc;
        self.sp = (self.sp + 1) & 0xF;
        self.pc = nnn;
    }

    fn alu(&mut self, kind: u16, x: usize, y: usize) {
        let (a, b) = (self.v[x], self.v[y]);
        match kind {
            0x0 => self.v[x] = b,
            0x1 => self.v[x] = a | b,
            0x2 => self.v[x] = a & b,
            0x3 => self.v[x] = a ^ b,
            0x4 => {
                // 8XY4
                let total = a as u16 + b as u16;
                self.v[x] = total as u8;
                self.v[0xF] = (total > 0xFF) as u8;
            }
            0x5 => {
                // 8XY5
                self.v[x] = a.wrapping_sub(b);
                self.v[0xF] = (a >= b) as u8;
            }
            0x6 => {
                // 8XY6
                self.v[x] = b >> 1;
                self.v[0xF] = b & 1;
            }
            0x7 => {
                // 8XY7
                self.v[x] = b.wrapping_sub(a);
                self.v[0xF] = (b >= a) as u8;
            }
            0xE => {
                // 8XYE
                self.v[x] = b << 1;
                self.v[0xF] = b >> 7;
            }
            _ => {}
        }
    }

    fn op_cxnn(&mut self, x: usize, nn: u8) {
        self.rng = xorshift32(self.rng);
        self.v[x] = (self.rng >> 24) as u8 & nn;
    }

    fn op_dxyn(&mut self, x: usize, y: usize, n: i32) {
        let x0 = self.v[x] as usize % WIDTH;
        let y0 = self.v[y] as usize % HEIGHT;
        let mut erased = 0u8;
        for row in 0..n {
            let bits = self.mem(self.i + row);
            let py = (y0 + row as usize) % HEIGHT;
            for col in 0..8 {
                if bits & (0x80 >> col) != 0 {
                    let at = py * WIDTH + (x0 + col) % WIDTH;
                    erased |= self.framebuffer[at];
                    self.framebuffer[at] ^= 1;
                }
            }
        }
        self.v[0xF] = erased;
    }

    fn misc(&mut self, nn: u8, x: usize) {
        match nn {
            0x07 => self.v[x] = self.delay_timer as u8,
            0x0A => self.op_fx0a(x),
            0x15 => self.delay_timer = self.v[x] as i32,
            0x18 => self.sound_timer = self.v[x] as i32,
            0x1E => self.i = (self.i + self.v[x] as i32) & 0xFFF,
            0x29 => self.i = (self.v[x] & 0xF) as i32 * 5,
            0x33 => self.op_fx33(x),
            0x55 => self.op_fx55(x),
            0x65 => self.op_fx65(x),
            _ => {}
        }
    }

    fn op_fx0a(&mut self, x: usize) {
        for k in 0..16 {
            if self.keys[k] != 0 {
                self.v[x] = k as u8;
                return;
            }
        }
        self.pc = (self.pc - 2) & 0xFFF; // no key held: wait on this instruction
    }

    fn op_fx33(&mut self, x: usize) {
        let value = self.v[x];
        let i = self.i;
        self.memory[(i & 0xFFF) as usize] = value / 100;
        self.memory[((i + 1) & 0xFFF) as usize] = value / 10 % 10;
        self.memory[((i + 2) & 0xFFF) as usize] = value % 10;
    }

    fn op_fx55(&mut self, x: usize) {
        for k in 0..=x {
            self.memory[((self.i + k as i32) & 0xFFF) as usize] = self.v[k];
        }
        self.i = (self.i + x as i32 + 1) & 0xFFF;
    }

    fn op_fx65(&mut self, x: usize) {
        for k in 0..=x {
            self.v[k] = self.mem(self.i + k as i32);
        }
        self.i = (self.i + x as i32 + 1) & 0xFFF;
    }
}
