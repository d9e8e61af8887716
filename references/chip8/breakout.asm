; Breakout for CHIP-8, written for envforge (assembled by asm.py).
;
; Playfield x 0..47, HUD (score, lives) at x 50..63. 36 bricks (12 columns x 3 rows, y 3..5),
; a 6-pixel paddle on row 30, a 1-pixel ball moving diagonally one pixel per frame.
; Keys: 4 moves the paddle left, 6 right. A brick scores 1 point; missing the ball costs a life.
; The game ends (OVER byte set, halt loop) when the lives run out or every brick is gone.
;
; Registers: V4 paddle x, V5 paddle y, V6 ball x, V7 ball y, V8 ball dx, V9 ball dy,
; VA score, VB lives, VC bricks left; V0-V3, VD, VE scratch; VF flags.

start:
    CALL selftest
    CLS
    LD V4, 21
    LD V5, 30
    LD VA, 0
    LD VB, 3
    LD VC, 36
    LD I, brick3
    LD V0, 0
    LD V1, 3
bricks:
    DRW V0, V1, 3
    ADD V0, 4
    SE V0, 48
    JP bricks
    LD I, paddle
    DRW V4, V5, 1
    CALL hud
    CALL serve

frame:                      ; one game tick per 60 Hz frame: wait for the delay timer
    LD V0, DT
    SE V0, 0
    JP frame
    LD V0, 1
    LD DT, V0
    LD I, paddle
    LD V0, 4
    SKNP V0
    CALL left
    LD V0, 6
    SKNP V0
    CALL right
    LD I, dot
    DRW V6, V7, 1           ; erase the ball
    ADD V6, V8
    ADD V7, V9
    SNE V6, 0xFF
    CALL wall_left
    SNE V6, 48
    CALL wall_right
    SNE V7, 0xFF
    CALL wall_top
    SNE V7, 31
    JP miss
    DRW V6, V7, 1           ; draw the ball; VF = it hit a lit pixel
    SE VF, 0
    CALL hit
    JP frame

left:                       ; I = paddle
    SNE V4, 0
    RET
    DRW V4, V5, 1
    ADD V4, 0xFF
    DRW V4, V5, 1
    RET

right:
    SNE V4, 42
    RET
    DRW V4, V5, 1
    ADD V4, 1
    DRW V4, V5, 1
    RET

wall_left:
    LD V6, 1
    LD V8, 1
    RET

wall_right:
    LD V6, 46
    LD V8, 0xFF
    RET

wall_top:
    LD V7, 1
    LD V9, 1
    RET

hit:                        ; the ball landed on a lit pixel: the paddle or a brick
    SNE V7, 30
    JP hit_paddle
    LD V0, 0xFC
    AND V0, V6              ; the brick's column
    LD I, brick1
    DRW V0, V7, 1           ; erase the brick (this redraws the ball's pixel)
    LD V0, 0
    SUBN V9, V0             ; dy = -dy
    LD VE, VF               ; (the borrow flag, kept for inspection)
    CALL hud                ; erase the old score
    ADD VA, 1
    CALL hud
    LD V0, VA
    LD I, score
    LD [I], V0
    LD V0, 2
    LD ST, V0               ; a short beep
    ADD VC, 0xFF
    SE VC, 0
    RET
    JP game_over

hit_paddle:
    DRW V6, V7, 1           ; take the ball off the paddle again
    LD V7, 29
    LD V9, 0xFF
    LD V0, V6
    SUB V0, V4              ; where on the paddle (0..5)
    LD VE, VF
    LD V8, 1
    LD V1, 3
    SUB V0, V1              ; VF = 1 when it hit the right half
    SE VF, 1
    LD V8, 0xFF
    DRW V6, V7, 1
    RET

miss:                       ; the ball left the field below the paddle (it is not drawn)
    CALL hud
    ADD VB, 0xFF
    CALL hud
    LD V0, VB
    LD I, lives
    LD [I], V0
    SE VB, 0
    JP respawn
    JP game_over
respawn:
    CALL serve
    JP frame

serve:                      ; a new ball at a random column, moving down
    RND V6, 31
    ADD V6, 8
    LD V7, 10
    LD V9, 1
    LD V8, 1
    RND V0, 1
    SE V0, 0
    LD V8, 0xFF
    LD I, dot
    DRW V6, V7, 1
    RET

game_over:
    LD V0, 1
    LD I, over
    LD [I], V0
halt:
    JP halt

hud:                        ; XOR-draws the score (3 digits) and the lives (1 digit)
    LD I, bcd
    LD B, VA
    LD V2, [I]
    LD V3, 50
    LD VD, 1
    LD F, V0
    DRW V3, VD, 5
    ADD V3, 5
    LD F, V1
    DRW V3, VD, 5
    ADD V3, 5
    LD F, V2
    DRW V3, VD, 5
    LD VD, 10
    LD F, VB
    DRW V3, VD, 5
    RET

selftest:                   ; power-on self-test: every opcode the game does not use, once;
    SYS 0x000               ; 0NNN: ignored          each flag kept in a register and stored
    LD V0, 0x5A
    LD V1, 0x0F
    OR V0, V1               ; 8XY1
    XOR V0, V1              ; 8XY3
    LD V2, 0xC8
    ADD V2, V0              ; 8XY4 (carry)
    LD V6, VF
    SHR V3, V2              ; 8XY6
    LD V7, VF
    SHL V2, V3              ; 8XYE
    LD V8, VF
    SE V2, V3               ; 5XY0
    SNE V2, V3              ; 9XY0
    ADD V0, 1
    LD V1, 15
    SKP V1                  ; EX9E: key F is never an action, so this jumps
    JP selftest_keys
    LD V5, K                ; FX0A
selftest_keys:
    LD V4, 2
    LD V0, V4
    JP V0, jump_table       ; BNNN: lands on the second entry
jump_table:
    JP selftest_bad
    JP selftest_ok
selftest_bad:
    LD V5, 0xEE
selftest_ok:
    LD V4, DT               ; FX07
    LD I, selftest_out
    ADD I, V4               ; FX1E
    LD [I], V8              ; FX55: V0..V8
    LD I, selftest_out
    LD V5, [I]              ; FX65
    LD V0, 0
    LD DT, V0
    RET

dot:
    db 0x80
paddle:
    db 0xFC
brick1:
    db 0xE0
brick3:
    db 0xE0, 0xE0, 0xE0
    org 0x3A0               ; the game's variables at fixed addresses
score:
    db 0
lives:
    db 3
over:
    db 0
bcd:
    db 0, 0, 0
selftest_out:
    db 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
